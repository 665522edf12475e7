"""Faults of a service's own process and configuration.

Crashes, hangs, leaks, flags, releases, credentials, certificates, clocks and slow chains.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import EmbeddedShop
from itbench_sre.faults.base import (
    _CPU_FLAGS,
    _ERROR_FLAGS,
    _FLAG_MEANING,
    _FLAG_NAME,
    _MEMORY_FLAGS,
    RATE,
    UPSTREAM_FORMS,
    Check,
    Mechanism,
    Param,
    _bad_value,
    _callees,
    _config,
    _config_change,
    _dump,
    _errors,
    _flag_fix,
    _flag_on,
    _lapsed_cert,
    _new_release,
    _register,
    _restore,
    _rollback,
    _running_instances,
    _same,
    _targets_with,
    _wrong_password,
    _wrong_upstream,
    errors_of,
    unscraped,
    upstream_errors,
    upstream_slow,
)

_register(
    Mechanism(
        "crash_loop_config",
        "crash_loop",
        ("catalog", "cart", "currency", "shipping", "payment", "recommendation"),
        _config_change(_bad_value),
        _restore,
        _same,
        lambda t, p: [unscraped(f'job="{t}"')],
        _rollback,
        summary="Deploys a configuration with a value the service cannot parse: every "
        "instance exits at start.",
        observable="the service's targets cannot be scraped; its instances keep restarting; "
        "its log says the configuration is invalid",
        params=(
            Param("key", str, "pool_size", "Top-level configuration key that is overwritten."),
            Param("value", object, "eight", "The unparseable value written to `key`."),
        ),
    )
)


_register(
    Mechanism(
        "hung_process",
        "process_hang",
        ("currency-0", "catalog-0", "shipping-0", "recommendation-0", "payment-0"),
        # The reload signal: the service's reload handler stops its listener from inside the
        # loop that serves it (socketserver's shutdown() called from the serving thread), so
        # the process stays alive and sleeping but never answers again until restarted.
        lambda shop, t, p: ChangeSet(signals=[(t, "HUP")]),
        lambda shop, t, p: ChangeSet(programs=[("restart", t)]),
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: [unscraped(f'instance="{t}"')],
        lambda t, p: [("restart", {"target": t})],
        summary="One instance stops answering while its process stays alive, until restarted.",
        aliases=lambda t: [t],
        observable="the instance cannot be scraped while its process runs (state S) with a "
        "long uptime; its callers time out",
    )
)


_register(
    Mechanism(
        "wrong_upstream",
        "wrong_upstream",
        ("checkout", "shipping", "payment", "recommendation", "frontend"),
        _config_change(_wrong_upstream),
        _restore,
        _same,
        lambda t, p: [upstream_errors(t, p["upstream"])],
        _rollback,
        summary="Deploys a configuration that points one upstream of the service at a wrong "
        "address: a closed port or a name that does not resolve.",
        observable="the service's calls to that upstream fail (connection refused, or the name "
        "does not resolve) since its configuration changed, while the upstream's other callers "
        "succeed",
        params=(
            Param(
                "upstream",
                str,
                "currency",
                "The upstream service whose address is wrong.",
                choices=_callees,
            ),
            Param(
                "form",
                str,
                "address",
                "How the address is wrong: a stale IP address (`address`), the right name on a "
                "closed port (`port`), or a retired name that does not resolve (`name`).",
                choices=lambda t: UPSTREAM_FORMS,
            ),
        ),
    )
)


_register(
    Mechanism(
        "wrong_credentials",
        "auth_failure",
        ("catalog", "checkout"),
        _config_change(_wrong_password),
        _restore,
        _same,
        _errors,
        _rollback,
        summary="Deploys a configuration with a wrong PostgreSQL password: the service's "
        "database queries fail.",
        params=(
            Param(
                "password",
                str,
                "",
                "The wrong password deployed (empty: a fresh one, shaped like the shop's).",
            ),
        ),
        observable="the service's database queries are refused at authentication since its configuration changed",
        keys=("postgres.",),
    )
)


_register(
    Mechanism(
        "feature_flag",
        "feature_flag",
        ("catalog", "checkout"),
        _config_change(_flag_on),
        _restore,
        _same,
        _errors,
        _flag_fix,
        summary="Turns on a feature flag whose code path fails requests.",
        params=(
            Param("flag", str, "dynamic_pricing", _FLAG_MEANING, choices=_ERROR_FLAGS),
            _FLAG_NAME,
        ),
        observable="the service answers errors on the flag's code path since its configuration changed",
    )
)


_register(
    Mechanism(
        "bad_release",
        "bad_release",
        ("cart", "payment", "catalog", "shipping", "recommendation"),
        _config_change(_new_release),
        _restore,
        _same,
        lambda t, p: [
            errors_of(t) if t != "catalog" else upstream_slow("frontend", "catalog", 0.2)
        ],
        _rollback,
        observable="the service answers errors (catalog: slow answers) since its release changed",
        summary="Deploys the service's faulty newer release (drawn per trial among its newer "
        "releases; errors, catalog's is slow).",
    )
)


_register(
    Mechanism(
        "memory_leak",
        "memory_leak",
        ("cart",),
        _config_change(_flag_on),
        _restore,
        _same,
        lambda t, p: [Check(f'max(process_resident_memory_bytes{{job="{t}"}}) > 95e6')],
        _flag_fix,
        observable="the service's resident memory climbs to its limit; the instance is killed "
        "and restarted",
        summary="Turns on a cache that grows with the traffic: the service's memory climbs.",
        params=(
            Param("flag", str, "session_cache", _FLAG_MEANING, choices=_MEMORY_FLAGS),
            _FLAG_NAME,
        ),
        spread=False,
    )
)


_register(
    Mechanism(
        "cpu_saturation",
        "cpu_saturation",
        ("currency", "recommendation"),
        _config_change(_flag_on),
        _restore,
        _same,
        lambda t, p: [Check(f'max(rate(process_cpu_seconds_total{{job="{t}"}}[{RATE}])) > 0.3')],
        _flag_fix,
        observable="the service burns a large share of a core and answers slowly",
        summary="Turns on a feature flag whose code path burns CPU on every request.",
        params=(
            Param("flag", str, "precise_rounding", _FLAG_MEANING, choices=_CPU_FLAGS),
            _FLAG_NAME,
        ),
    )
)


_register(
    Mechanism(
        "expired_certificate",
        "certificate_expired",
        ("payment",),
        _config_change(_lapsed_cert),
        _restore,
        _same,
        lambda t, p: [upstream_errors("checkout", "payment")],
        _rollback,
        observable="checkout's calls to payment fail the TLS handshake (certificate expired)",
        summary="Deploys a lapsed TLS certificate: the service's callers fail the handshake.",
    )
)


_register(
    Mechanism(
        "deadlock",
        "process_hang",
        ("currency-0", "catalog-0", "shipping-0", "payment-0", "cart-0", "cart-1"),
        # The diagnostics signal switches on detailed request statistics, whose lock order
        # is the reverse of their flusher's: the request workers deadlock within moments.
        lambda shop, t, p: ChangeSet(signals=[(t, "USR1")]),
        lambda shop, t, p: ChangeSet(programs=[("restart", t)]),
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: [
            Check(f'inflight_requests{{instance="{t}"}} > 3'),
            # A counter series exists only once a request completed: an instance that deadlocks
            # before its first answer has none, and a scraped instance without one serves 0/s.
            Check(
                f'(sum(rate(http_requests_total{{instance="{t}"}}[{RATE}])) '
                f'or sum(up{{instance="{t}"}} == 1) * 0) < 0.05'
            ),
        ],
        lambda t, p: [("restart", {"target": t})],
        summary="The request workers of one instance deadlock on two locks; the process "
        "lives, sleeps and still answers its metrics endpoint.",
        aliases=lambda t: [t],
        observable="the instance is scraped (up) but serves no request: its in-flight requests "
        "pile up and its request rate drops to zero; callers time out",
    )
)


def _flag_leak(
    name: str, flag: str, signature: Callable[[str], list[Check]], summary: str, observable: str
) -> Mechanism:
    """A leak that a flag turns on (its fix: the flag off and a restart)."""
    return Mechanism(
        name,
        name,
        _targets_with(flag),
        _config_change(_flag_on),
        _restore,
        _same,
        lambda t, p: signature(t),
        _flag_fix,
        summary=summary,
        params=(Param("flag", str, flag, _FLAG_MEANING, choices=lambda t: (flag,)), _FLAG_NAME),
        observable=observable,
        # Observable by its resource long before calls fail: nothing to measure at handover.
        spread=False,
    )


_register(
    _flag_leak(
        "fd_leak",
        "audit_trail",
        # Over the last two minutes: a busy service can exhaust its descriptors within
        # seconds, and one that has cannot answer a scrape any more.
        lambda t: [
            Check(
                f'max(max_over_time(process_open_fds{{job="{t}"}}[2m]) '
                f'/ max_over_time(process_max_fds{{job="{t}"}}[2m])) > 0.6'
            )
        ],
        "Turns on an audit trail that opens files per request and never closes them: the "
        "service runs out of file descriptors.",
        "the service's open file descriptors climb to its limit; then it fails to accept "
        "connections and to reach its datastores",
    )
)


_register(
    _flag_leak(
        "thread_leak",
        "background_refresh",
        lambda t: [Check(f'max(process_threads{{job="{t}"}}) > 120')],
        "Turns on a background refresh that starts a thread per request and never ends it: "
        "threads pile up and compete for the interpreter.",
        "the service's thread count climbs to its limit, its CPU and latency rising; then "
        "the new threads its requests need are refused",
    )
)


_register(
    _flag_leak(
        "connection_leak",
        "statement_cache",
        lambda t: [Check(f'max(process_open_fds{{job="{t}"}}) > 36'), errors_of(t)],
        "Turns on a statement cache that opens a database session per request and keeps it: "
        "PostgreSQL runs out of connection slots for every client.",
        "the leaking service's open descriptors (its sessions) grow; every database client "
        "then fails to connect for want of connection slots",
    )
)


def _skew(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(
        files=[(f"shop:run/clock/{target}", f"{float(params['offset_s'])}\n")],
        signals=[(target, "USR2")],
    )


_register(
    Mechanism(
        "clock_skew",
        "clock_skew",
        ("checkout-0", "payment-0", "shipping-0", "recommendation-0", "frontend-0"),
        _skew,
        lambda shop, t, p: ChangeSet(programs=[("restart", t)]),
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: [
            Check(
                f'sum(rate(http_requests_total{{instance="{t}",code="401"}}[{RATE}])) > 0.1 or '
                f'sum(rate(upstream_requests_total{{instance="{t}",outcome="error"}}[{RATE}]))'
                " > 0.1"
            )
        ],
        lambda t, p: [("restart", {"target": t})],
        summary="The instance's clock jumps by `offset_s`: it refuses its callers' requests, and "
        "the services it calls refuse its own, as dated outside the allowed window (until a "
        "restart re-syncs it).",
        params=(
            Param(
                "offset_s", float, 320, "Clock step, seconds (beyond the 30 s window).", minimum=31
            ),
        ),
        aliases=lambda t: [t],
        observable="the instance answers 401 to its callers and its own upstream calls get 401 "
        "(their dates outside its allowed window) while everything else is served; its log "
        "timestamps are off by the step",
    )
)


def _rotate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    """A Redis password rotation whose rollout restarted every client instance but ``target``."""
    secret = str(params["password"])
    files = []
    signals = []
    for service in ("cart", "checkout", "notification"):
        cfg = _config(shop, service)
        cfg["redis_password"] = secret
        files.append((service, _dump(cfg)))
        signals += [(i, "TERM") for i in _running_instances(service) if i != target]
    return ChangeSet(
        # Sessions opened before the rotation stay authenticated until they are dropped.
        redis_commands=[
            ["CONFIG", "SET", "requirepass", secret],
            ["-a", secret, "--no-auth-warning", "CLIENT", "KILL", "TYPE", "normal"],
        ],
        files=files,
        signals=signals,
    )


def _unrotate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    restored = [_restore(shop, s, params) for s in ("cart", "checkout", "notification")]
    return ChangeSet(
        redis_commands=[["-a", str(params["password"]), "CONFIG", "SET", "requirepass", ""]],
        files=[f for r in restored for f in r.files],
        signals=[x for r in restored for x in r.signals],
    )


_register(
    Mechanism(
        "partial_rollout",
        "partial_failure",
        ("cart-0", "cart-1"),
        _rotate,
        _unrotate,
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: [
            Check(
                f'sum(increase(upstream_requests_total{{instance="{t}",upstream="redis",'
                'outcome="error"}[10s])) >= 1'
            )
        ],
        lambda t, p: [("restart", {"target": t})],
        summary="A Redis password rotation is rolled out to every client instance but one: "
        "that replica of two keeps the old credentials and fails its requests.",
        params=(Param("password", str, "rotated-7f3a", "The new Redis password."),),
        aliases=lambda t: [t],
        observable="one replica of the service fails its Redis calls (authentication required) "
        "while the other serves; the service's error rate is about half its traffic",
    )
)


_register(
    Mechanism(
        "cascading_timeout",
        "cascading_timeout",
        ("currency",),
        _config_change(_new_release),
        _restore,
        _same,
        lambda t, p: [upstream_slow("payment", t, 0.4)],
        _rollback,
        summary="Deploys the service's faulty newer release, which answers in most of a second: "
        "below its own latency alert, but its callers' chained calls exceed their callers' "
        "timeouts, which fail and retry up the chain.",
        observable="the deepest service is slower (within its own alert), its callers slower "
        "still, and the callers at the top of the chain time out; the alerts fire above the "
        "cause",
    )
)
