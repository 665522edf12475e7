"""The model side of the ``llm`` agent: its settings, prices, and an OpenAI Chat Completions client.

Any server speaking the Chat Completions protocol works: hosted APIs and local servers (vLLM,
Ollama, llama.cpp's server). :class:`LlmSettings` reads the agent's options (``--option
llm_*=VALUE`` or the flags ``--model``, ``--base-url``, ``--api-key-env``, ``--temperature``,
``--max-steps``); :func:`configure` checks them once per run and fills in the defaults so
that the manifest records every setting. The API key is never an option (options are
recorded): it is read from the environment variable named by ``llm_api_key_env``
(``OPENAI_API_KEY`` by default).

:class:`ChatClient` sends one request at a time with the SDK's own retries switched off: it
retries 408, 409, 429, 5xx and connection failures itself, with exponential backoff (or the
server's ``Retry-After``), never past the trial's deadline, and records each retry, the tokens
of each response and their cost (:class:`PriceTable`) in the trial's trajectory and usage.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itbench.models import Usage
from itbench.options import OptionSpec, check_integer, check_number, check_text, checked_values
from itbench.trajectory import EventStep, Step, StepUsage

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletion

#: Environment variables read when the options do not say.
BASE_URL_ENV = "ITBENCH_LLM_BASE_URL"
MODEL_ENV = "ITBENCH_LLM_MODEL"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Statuses worth another try (the SDK's own list).
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
#: Longest wait between two tries, and longest ``Retry-After`` honoured, in seconds.
MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 60.0


class LlmError(Exception):
    """The model's API refused or failed for good (after retries), or a setting is wrong."""


class ModelUnavailable(LlmError):
    """The model's API could not be reached, or kept answering "try later", past its retries.

    The trial ends ``unavailable``: neither the agent's failure nor the harness's.
    """


@dataclass(frozen=True)
class LlmSettings:
    """The settings of the ``llm`` agent (each is the option ``llm_<name>``).

    Attributes:
        model: The model name the server knows (``--model``; ``$ITBENCH_LLM_MODEL``).
        base_url: The server's base URL (``--base-url``; ``$ITBENCH_LLM_BASE_URL``; the SDK's
            default, OpenAI's API, when neither is set).
        api_key_env: The environment variable holding the API key (``--api-key-env``).
        temperature: Sampling temperature (``--temperature``).
        seed: Sampling seed sent to the server; by default each trial's public seed.
        max_steps: Model responses per trial (``--max-steps``).
        max_tokens: Output tokens per response (unset: the server's default).
        tool_output_chars: Characters of a tool result shown to the model; the rest is cut and
            the cut is stated.
        submit_retries: Refused submissions the model may correct.
        retries: Retries of one request on 408, 409, 429, 5xx and connection failures.
        request_timeout: Seconds one request may take.
        price_input: USD per million input tokens (default: from the price table).
        price_output: USD per million output tokens (default: from the price table).
        prices: A price table file replacing the shipped one.
        system_prompt: A file replacing the domain's system prompt.
    """

    model: str
    base_url: str | None = None
    api_key_env: str = DEFAULT_KEY_ENV
    temperature: float = 0.0
    seed: int | None = None
    max_steps: int = 40
    max_tokens: int | None = None
    tool_output_chars: int = 12_000
    submit_retries: int = 3
    retries: int = 6
    request_timeout: float = 120.0
    price_input: float | None = None
    price_output: float | None = None
    prices: str | None = None
    system_prompt: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], seed: int | None = None) -> LlmSettings:
        """The settings in ``options`` (already checked by :func:`configure`).

        Args:
            options: The trial's options.
            seed: The trial's seed, used when ``llm_seed`` is not set.
        """
        given = {k.removeprefix(PREFIX): v for k, v in options.items() if k.startswith(PREFIX)}
        if given.get("seed") is None:
            given["seed"] = seed
        return cls(**given)

    def recorded(self) -> dict[str, Any]:
        """The settings as the trajectory records them."""
        return {k: v for k, v in asdict(self).items() if v is not None}


PREFIX = "llm_"
_INTEGERS = {
    "seed": (0, 2**63 - 1),
    "max_steps": (1, 10_000),
    "max_tokens": (1, 10_000_000),
    "tool_output_chars": (200, 10_000_000),
    "submit_retries": (0, 100),
    "retries": (0, 100),
}
_NUMBERS = {
    "temperature": (0.0, 2.0),
    "request_timeout": (1.0, 3600.0),
    "price_input": (0.0, 1e6),
    "price_output": (0.0, 1e6),
}
_STRINGS = ("model", "base_url", "api_key_env", "prices", "system_prompt")
_RECORDED_DEFAULTS = ("temperature", "max_steps", "tool_output_chars", "submit_retries", "retries")


def configure(options: dict[str, Any]) -> dict[str, Any]:
    """Check the ``llm_*`` options of a run and fill in the defaults the manifest records.

    Raises:
        ValueError: an unknown ``llm_*`` option, a wrong value, no model, a missing file, or
            no API key for a hosted API (the message names the option or variable).
    """
    out = dict(options)
    known = {f"{PREFIX}{name}" for name in (*_INTEGERS, *_NUMBERS, *_STRINGS)}
    for key in out:
        if key.startswith(PREFIX) and key not in known:
            raise ValueError(f"unknown option {key} (known: {', '.join(sorted(known))})")
    out = checked_values(out, option_specs())
    defaults = LlmSettings(model="")
    for name in _RECORDED_DEFAULTS:
        out.setdefault(PREFIX + name, getattr(defaults, name))
    out.setdefault(f"{PREFIX}api_key_env", DEFAULT_KEY_ENV)
    if not out.get(f"{PREFIX}model"):
        if not os.environ.get(MODEL_ENV):
            raise ValueError(f"the llm agent needs a model: --model NAME (or ${MODEL_ENV})")
        out[f"{PREFIX}model"] = os.environ[MODEL_ENV]
    if not out.get(f"{PREFIX}base_url") and os.environ.get(BASE_URL_ENV):
        out[f"{PREFIX}base_url"] = os.environ[BASE_URL_ENV]
    key_env = out[f"{PREFIX}api_key_env"]
    if not out.get(f"{PREFIX}base_url") and not os.environ.get(key_env):
        raise ValueError(
            f"no API key: set ${key_env} (or name another variable with --api-key-env), "
            f"or point --base-url (${BASE_URL_ENV}) at a server that needs none"
        )
    for name in ("prices", "system_prompt"):
        path = out.get(PREFIX + name)
        if path is not None:
            if not Path(path).is_file():
                raise ValueError(f"option {PREFIX}{name}: {path} is not a file")
            out[PREFIX + name] = str(Path(path).resolve())
    if out.get(f"{PREFIX}prices"):
        PriceTable.load(Path(out[f"{PREFIX}prices"]))
    return out


#: The ``llm_*`` options with a flag of their own: flag, help.
_FLAGS = {
    "model": ("model", "llm: the model name the server knows."),
    "base_url": ("base-url", "llm: the Chat Completions server's base URL."),
    "api_key_env": (
        "api-key-env",
        "llm: the environment variable holding the API key (default OPENAI_API_KEY).",
    ),
    "temperature": ("temperature", "llm: the sampling temperature (default 0)."),
    "max_steps": ("max-steps", "llm: model responses per trial (default 40)."),
}
#: What the other ``llm_*`` options set (see :class:`LlmSettings`).
_HELP = {
    "seed": "the sampling seed sent to the server (default: each trial's public seed)",
    "max_tokens": "output tokens per response (default: the server's)",
    "tool_output_chars": "characters of a tool result shown to the model (default 12000)",
    "submit_retries": "refused submissions the model may correct (default 3)",
    "retries": "retries of one request on 408, 409, 429, 5xx and lost connections (default 6)",
    "request_timeout": "seconds one request may take (default 120)",
    "price_input": "USD per million input tokens (default: from the price table)",
    "price_output": "USD per million output tokens (default: from the price table)",
    "prices": "a price table file replacing the shipped one",
    "system_prompt": "a file replacing the domain's system prompt",
}


def option_specs() -> list[OptionSpec]:
    """Every ``llm_*`` option (:class:`LlmSettings`), the usual ones with a flag."""
    checks = {
        **{name: check_integer(int(low), int(high)) for name, (low, high) in _INTEGERS.items()},
        **{name: check_number(low, high) for name, (low, high) in _NUMBERS.items()},
        **dict.fromkeys(_STRINGS, check_text),
    }
    specs = []
    for name, check in checks.items():
        flag, help_ = _FLAGS[name] if name in _FLAGS else (PREFIX + name, f"llm: {_HELP[name]}.")
        specs.append(OptionSpec(flag, PREFIX + name, help_, check=check, flag=name in _FLAGS))
    return specs


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of that many tokens, in USD."""
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


@dataclass
class PriceTable:
    """Model name -> :class:`Price`, as ``itbench/data/prices.json`` lists them."""

    models: dict[str, Price] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None = None) -> PriceTable:
        """The shipped table, or the one in ``path``.

        Raises:
            ValueError: the file is not a table (naming the file and the entry).
        """
        if path is None:
            text = resources.files("itbench").joinpath("data/prices.json").read_text("utf-8")
            where = "itbench/data/prices.json"
        else:
            text, where = path.read_text(encoding="utf-8"), str(path)
        try:
            models = json.loads(text)["models"]
            return cls(
                {name: Price(float(p["input"]), float(p["output"])) for name, p in models.items()}
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(
                f'{where}: not a price table ({{"models": {{NAME: {{"input": USD, "output": USD}}}}}}): {exc}'
            ) from None

    def find(self, model: str) -> Price | None:
        """The price of ``model``: exact name, longest prefix, then the name after its last ``/``."""
        for name in (model, model.rsplit("/", 1)[-1]):
            if name in self.models:
                return self.models[name]
            prefixes = [m for m in self.models if name.startswith(m)]
            if prefixes:
                return self.models[max(prefixes, key=len)]
        return None


def price_of(settings: LlmSettings) -> Price | None:
    """The price the trial's usage is costed at (``None``: unknown, no cost recorded)."""
    table = PriceTable.load(Path(settings.prices) if settings.prices else None)
    found = table.find(settings.model)
    if settings.price_input is None and settings.price_output is None:
        return found
    return Price(
        settings.price_input
        if settings.price_input is not None
        else (found.input if found else 0.0),
        settings.price_output
        if settings.price_output is not None
        else (found.output if found else 0.0),
    )


class ChatClient:
    """Chat Completions requests of one trial, with retries, usage and cost accounting.

    Args:
        settings: The agent's settings.
        usage: The trial's usage, added to after each response.
        steps: The trial's trajectory steps (retries are recorded there).
        deadline: Epoch seconds after which no request is started and no retry waited for.
        client: An SDK client (built from the settings when not given).
    """

    def __init__(
        self,
        settings: LlmSettings,
        usage: Usage,
        steps: list[Step],
        deadline: float,
        client: OpenAI | None = None,
    ) -> None:
        self.settings = settings
        self.usage = usage
        self.steps = steps
        self.deadline = deadline
        self.price = price_of(settings)
        self._client = client or self._build_client()

    def _build_client(self) -> OpenAI:
        from openai import OpenAI

        key = os.environ.get(self.settings.api_key_env) or "none"
        return OpenAI(
            base_url=self.settings.base_url,
            api_key=key,
            max_retries=0,
            timeout=self.settings.request_timeout,
        )

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        s = self.settings
        extra: dict[str, Any] = {}
        if s.seed is not None:
            extra["seed"] = s.seed
        if s.max_tokens is not None:
            extra["max_tokens"] = s.max_tokens
        if tools:
            extra["tools"] = tools
            extra["tool_choice"] = "auto"
        timeout = max(1.0, min(s.request_timeout, self.deadline - time.time()))
        return self._client.chat.completions.create(
            model=s.model,
            messages=messages,  # type: ignore[arg-type]
            temperature=s.temperature,
            timeout=timeout,
            **extra,
        )

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> tuple[ChatCompletion, StepUsage, float]:
        """One response to ``messages``: the completion, its usage and the seconds it took.

        Raises:
            ModelUnavailable: the server could not be reached or kept failing past the retries.
            LlmError: the server refused for good, or the deadline came first.
        """
        import openai

        attempt = 0
        while True:
            if time.time() >= self.deadline:
                raise LlmError("the trial's time is up")
            start = time.perf_counter()
            try:
                completion = self._request(messages, tools)
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                retryable = status is None or status in RETRY_STATUSES
                if not retryable:
                    raise LlmError(_describe(exc)) from None
                if attempt >= self.settings.retries:
                    raise ModelUnavailable(
                        f"{_describe(exc)} (after {attempt + 1} attempts)"
                    ) from None
                delay = self._delay(attempt, exc)
                if time.time() + delay >= self.deadline:
                    raise ModelUnavailable(f"{_describe(exc)}; no time left to retry") from None
                self.steps.append(
                    EventStep(
                        name="retry",
                        detail={"status": status, "error": _describe(exc), "wait": round(delay, 3)},
                    )
                )
                attempt += 1
                time.sleep(delay)
                continue
            elapsed = time.perf_counter() - start
            if not getattr(completion, "choices", None):
                raise LlmError("the server answered without a choice")
            return completion, self._account(completion), elapsed

    def _delay(self, attempt: int, exc: Exception) -> float:
        response = getattr(exc, "response", None)
        header: str | None = response.headers.get("retry-after") if response is not None else None
        if header is not None:
            try:
                wait = float(header)
            except ValueError:
                wait = -1.0
            if wait >= 0:
                return min(wait, MAX_RETRY_AFTER)
        base: float = min(MAX_BACKOFF, 0.5 * 2.0**attempt)
        return base * random.uniform(0.75, 1.25)

    def _account(self, completion: Any) -> StepUsage:
        reported = getattr(completion, "usage", None)
        tokens_in = int(getattr(reported, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(reported, "completion_tokens", 0) or 0)
        cost = self.price.cost(tokens_in, tokens_out) if self.price is not None else None
        u = self.usage
        u.input_tokens = (u.input_tokens or 0) + tokens_in
        u.output_tokens = (u.output_tokens or 0) + tokens_out
        if cost is not None:
            u.cost_usd = round((u.cost_usd or 0.0) + cost, 10)
        return StepUsage(input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost)


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", None) or exc)
    return f"HTTP {status}: {message[:300]}" if status else f"{type(exc).__name__}: {message[:300]}"


__all__ = [
    "ChatClient",
    "LlmError",
    "LlmSettings",
    "ModelUnavailable",
    "Price",
    "PriceTable",
    "configure",
    "price_of",
]
