#!/bin/sh
# Installs the Debian packages the domains run for real, the agent sandbox (bubblewrap, and
# the system python3 that sandboxed agents run with) and chromium (the report page's test).
# Servers are started per environment by itbench itself, never as system services. Does
# nothing when every binary is already present.
set -eu

# command-to-look-for:debian-package
NEEDS="prometheus:prometheus redis-server:redis-server /usr/lib/postgresql/15/bin/postgres:postgresql bwrap:bubblewrap /usr/bin/python3:python3 chromium:chromium"

missing=""
if [ "${1:-}" = "venv" ]; then
  # Only the venv module, for the Python that runs the Makefile.
  ver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  NEEDS=""
  missing="python3-venv python$ver-venv"
fi
for pair in $NEEDS; do
  cmd=${pair%%:*}
  pkg=${pair#*:}
  if [ -x "$cmd" ] || command -v "$cmd" >/dev/null 2>&1; then continue; fi
  missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "itbench: missing system packages:$missing (install them with your package manager)" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "itbench: installing system packages:$missing" >&2
# Keep package scripts from starting system-wide services: itbench starts its own servers.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  own_policy=1
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
[ "$own_policy" -eq 1 ] && $SUDO rm -f "$policy"
exit 0
