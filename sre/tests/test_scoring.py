"""The scoring formulas on hand-made submissions."""

from __future__ import annotations

from itbench_sre.scoring import localization, propagation_f1, resolve
from itbench_sre.spec import GroundTruth, SreSubmission

TRUTH = GroundTruth(
    incident=True,
    root_causes=["cart"],
    aliases={"cart": []},
    fault_types=["bad_release"],
    propagation=[("cart", "frontend"), ("cart", "checkout"), ("checkout", "frontend")],
)


def sub(**fields: object) -> SreSubmission:
    return SreSubmission.model_validate({"incident": True, **fields})


def test_aliases_and_replicas_resolve_to_the_entity() -> None:
    for name in ("cart", "cart-service", "CartService", "cart-1", "cart_svc"):
        assert resolve(name, TRUTH) == "cart", name
    assert resolve("productcatalog", TRUTH) == "catalog"
    assert resolve("nonsense", TRUTH) is None


def test_exact_localization() -> None:
    m = localization(sub(root_causes=["cart-service"]), TRUTH)
    assert m["loc_pass"] and m["loc_f1"] == 1.0 and m["loc_top1"] and m["loc_partial"] == 1.0


def test_top_k_and_precision() -> None:
    m = localization(sub(root_causes=["frontend", "checkout", "cart"]), TRUTH)
    assert not m["loc_top1"] and m["loc_top3"]
    assert m["loc_precision"] == 0.0 and not m["loc_pass"]
    # frontend is one hop from cart: partial credit 1/(1+1)
    assert m["loc_partial"] == 0.5


def test_multi_root_recall() -> None:
    truth = TRUTH.model_copy(update={"root_causes": ["cart", "currency"]})
    m = localization(sub(root_causes=["currency", "payment"]), truth)
    assert m["loc_recall"] == 0.5 and m["loc_precision"] == 0.5 and not m["loc_pass"]


def test_propagation_edge_f1() -> None:
    assert propagation_f1(sub(propagation=TRUTH.propagation), TRUTH) == 1.0
    half = propagation_f1(sub(propagation=[("cart", "frontend"), ("frontend", "cart")]), TRUTH)
    assert half == round(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3), 4)
    assert propagation_f1(sub(propagation=[]), TRUTH) == 0.0
