"""The scoring formulas on hand-made submissions: the worked examples of sre/README.md."""

from __future__ import annotations

from itbench_sre import spread, topology
from itbench_sre.scoring import judge_answer, localization, propagation_f1, resolve
from itbench_sre.spec import GroundTruth, SreSubmission

CART = GroundTruth(
    incident=True,
    root_causes=["cart"],
    aliases={"cart": []},
    fault_types=["bad_release"],
    propagation=[("cart", "frontend"), ("cart", "checkout"), ("checkout", "frontend")],
)
LINK = GroundTruth(
    incident=True,
    root_causes=["checkout->payment"],
    aliases={"checkout->payment": []},
    fault_types=["packet_loss"],
)
#: What the evaluator measured degrading during a retry storm started by frontend.
STORM_SPREAD = [
    ("catalog", "frontend"),
    ("catalog", "recommendation"),
    ("recommendation", "frontend"),
]


def sub(**fields: object) -> SreSubmission:
    return SreSubmission.model_validate({"incident": True, **fields})


def test_aliases_and_replicas_resolve_to_the_entity() -> None:
    for name in ("cart", "cart-service", "CartService", "cart-1", "cart_svc"):
        assert resolve(name, CART) == "cart", name
    assert resolve("productcatalog", CART) == "catalog"
    assert resolve("Checkout -> payment-service", CART) == "checkout->payment"
    assert resolve("nonsense", CART) is None


def test_exact_localization() -> None:
    m = localization(sub(root_causes=["cart-service"]), CART)
    assert m["loc_pass"] and m["loc_score"] == 1.0 and m["loc_top1"] and m["loc_mrr"] == 1.0


def test_every_submitted_entity_is_scored() -> None:
    """Example 1: four entities with the root among them: recall 1, precision 1/4."""
    m = localization(sub(root_causes=["frontend", "checkout", "cart", "catalog"]), CART)
    assert m["loc_recall"] == 1.0 and m["loc_precision"] == 0.25 and m["loc_score"] == 0.25
    assert not m["loc_pass"] and not m["loc_top1"] and m["loc_top3"] and m["loc_mrr"] == 0.3333


def test_listing_every_entity_earns_almost_nothing() -> None:
    """Example 2: every entity of the shop: precision 1/|entities|, no pass."""
    every = topology.entities()
    m = localization(sub(root_causes=every), CART)
    assert m["loc_score"] == round(1 / len(every), 4) and not m["loc_pass"]
    # Unknown names count against precision too.
    m = localization(sub(root_causes=["cart", "the-database-probably"]), CART)
    assert m["loc_precision"] == 0.5 and not m["loc_pass"]


def test_a_missed_root_gates_the_score_to_zero() -> None:
    """Example 3: two roots, one named: recall 1/2, score 0."""
    truth = CART.model_copy(update={"root_causes": ["cart", "currency"]})
    m = localization(sub(root_causes=["currency", "payment"]), truth)
    assert m["loc_recall"] == 0.5 and m["loc_score"] == 0.0 and not m["loc_pass"]
    m = localization(sub(root_causes=["currency", "cart"]), truth)
    assert m["loc_pass"] and m["loc_score"] == 1.0


def test_a_link_is_named_by_its_edge_or_both_endpoints_never_by_mesh() -> None:
    """Example 4: a network fault on checkout->payment."""
    for answer in (["checkout->payment"], ["payment->checkout"], ["payment", "checkout"]):
        m = localization(sub(root_causes=answer), LINK)
        assert m["loc_pass"] and m["loc_score"] == 1.0, answer
    for answer in (["payment"], ["mesh"], ["checkout"]):
        m = localization(sub(root_causes=answer), LINK)
        assert m["loc_score"] == 0.0 and not m["loc_pass"], answer
    m = localization(sub(root_causes=["mesh", "checkout->payment"]), LINK)
    assert m["loc_score"] == 0.5 and not m["loc_pass"]
    # Both endpoints after a wrong guess: ranked metrics see the link only at rank 3.
    m = localization(sub(root_causes=["currency", "checkout", "payment"]), LINK)
    assert m["loc_score"] == 0.5 and not m["loc_top1"] and m["loc_top3"]


def test_propagation_is_graded_against_the_measured_spread() -> None:
    """Example 5: directed edges, precision and recall, pass at F1 >= 0.7."""
    exact = propagation_f1(sub(propagation=CART.propagation), CART)
    assert exact["propagation_f1"] == 1.0
    reversed_edges = [(b, a) for a, b in CART.propagation]
    assert propagation_f1(sub(propagation=reversed_edges), CART)["propagation_f1"] == 0.0
    # Every call edge of the shop, oriented from callee to caller: 3 of 18 right.
    every = [(callee, caller) for caller, callee in topology.edges()]
    m = propagation_f1(sub(propagation=every), CART)
    assert m["prop_recall"] == 1.0 and m["prop_precision"] == round(3 / len(every), 4)
    assert m["propagation_f1"] == round(2 * 3 / (len(every) + 3), 4) < 0.7
    # Both orientations of every edge: half as precise again.
    both = every + [(a, b) for a, b in topology.edges()]
    assert propagation_f1(sub(propagation=both), CART)["propagation_f1"] < 0.3


def test_the_real_spread_of_a_retry_storm_passes() -> None:
    """Example 6: the static chain of frontend is empty; the measured spread is not."""
    truth = GroundTruth(
        incident=True, root_causes=["frontend"], fault_types=["retry_storm"], propagation=[]
    )
    answer = sub(root_causes=["frontend"], fault_type="retry_storm", propagation=STORM_SPREAD)
    passes, metrics = judge_answer(truth, answer, STORM_SPREAD)
    assert passes["diagnosis"] and metrics["propagation_f1"] == 1.0
    passes, metrics = judge_answer(
        truth, answer.model_copy(update={"propagation": []}), STORM_SPREAD
    )
    assert not passes["diagnosis"] and metrics["propagation_f1"] == 0.0
    # Two of three edges still pass (F1 0.8); one of three does not (0.5).
    two = answer.model_copy(update={"propagation": STORM_SPREAD[:2]})
    assert judge_answer(truth, two, STORM_SPREAD)[0]["diagnosis"]
    one = answer.model_copy(update={"propagation": STORM_SPREAD[:1]})
    assert not judge_answer(truth, one, STORM_SPREAD)[0]["diagnosis"]
    # Nothing degraded and nothing reported: full marks; something reported: none.
    quiet = judge_answer(truth, answer.model_copy(update={"propagation": []}), [])[1]
    assert quiet["propagation_f1"] == 1.0
    assert judge_answer(truth, answer, [])[1]["propagation_f1"] == 0.0


def test_degraded_edges_are_measured_against_the_baseline_and_kept_near_the_roots() -> None:
    base = {
        ("catalog", "frontend"): {"calls": 40, "error_ratio": 0.0, "mean_s": 0.01},
        ("currency", "shipping"): {"calls": 10, "error_ratio": 0.2, "mean_s": 0.01},
    }
    fault = {
        # errors well above the baseline: degraded
        ("catalog", "frontend"): {"calls": 30, "error_ratio": 0.5, "mean_s": 0.02},
        # as erring as before: not degraded
        ("currency", "shipping"): {"calls": 12, "error_ratio": 0.25, "mean_s": 0.012},
        # slower by far: degraded
        ("catalog", "recommendation"): {"calls": 9, "error_ratio": 0.0, "mean_s": 0.4},
        # too few calls to judge
        ("payment", "checkout"): {"calls": 2, "error_ratio": 1.0, "mean_s": 2.0},
        # degraded, but far from the root: a blip elsewhere
        ("shipping", "checkout"): {"calls": 5, "error_ratio": 0.6, "mean_s": 0.1},
    }
    edges = spread.degraded(fault, base)
    assert edges == [
        ("catalog", "frontend"),
        ("catalog", "recommendation"),
        ("shipping", "checkout"),
    ]
    assert spread.connected(edges, ["frontend"]) == edges[:2]
    assert spread.connected(edges, ["checkout->shipping"]) == [("shipping", "checkout")]
    assert spread.connected(edges, ["catalog-0"]) == edges[:2]
