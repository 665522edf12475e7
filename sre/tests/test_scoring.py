"""The scoring formulas on hand-made submissions: the worked examples of sre/README.md."""

from __future__ import annotations

from itbench_sre import cause, spread, topology
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


def test_edges_the_measurement_cannot_tell_count_neither_way() -> None:
    """Example 7: an undetermined edge, named or not, leaves the F1 as it was."""
    truth = CART
    spread_edges = [("cart", "checkout"), ("checkout", "frontend")]
    unscored = [("cart", "frontend")]
    exact = sub(root_causes=["cart"], fault_type="bad_release", propagation=spread_edges)
    more = exact.model_copy(update={"propagation": [*spread_edges, ("cart", "frontend")]})
    for answer in (exact, more):
        m = judge_answer(truth, answer, spread_edges, unscored)[1]
        assert m["propagation_f1"] == 1.0
    wrong = exact.model_copy(update={"propagation": [*spread_edges, ("currency", "payment")]})
    assert judge_answer(truth, wrong, spread_edges, unscored)[1]["propagation_f1"] == 0.8


def test_an_unmeasured_spread_is_not_scored() -> None:
    """Example 8: no propagation scored (nothing measured): the diagnosis stands without it."""
    answer = sub(root_causes=["cart"], fault_type="bad_release", propagation=[])
    passes, metrics = judge_answer(CART, answer, [], [], score_propagation=False)
    assert passes["diagnosis"] and metrics["propagation_scored"] is False
    # Scored, an empty answer against a measured spread fails.
    passes, _ = judge_answer(CART, answer, [("cart", "checkout")], [], score_propagation=True)
    assert not passes["diagnosis"]


def _counts(calls: int, errors: int = 0, slow: int = 0) -> spread.Counts:
    return spread.Counts(calls=calls, errors=errors, slow=slow)


def test_an_edge_is_degraded_only_on_a_significant_rise_and_healthy_only_on_evidence() -> None:
    base = _counts(40)
    # every call failing: degraded on three calls already
    assert spread.verdict(_counts(3, errors=3), base)[0] == "degraded"
    # most calls slow: degraded
    assert spread.verdict(_counts(12, slow=9), base)[0] == "degraded"
    # too few calls to tell
    assert spread.verdict(_counts(2, errors=2), base)[0] == "undetermined"
    # a share of failures that could be chance: neither degraded nor healthy
    assert spread.verdict(_counts(12, errors=2), base)[0] == "undetermined"
    # no failure in a dozen calls: healthy
    assert spread.verdict(_counts(12), base)[0] == "healthy"
    # one stray failure is what a healthy shop does now and then
    assert spread.verdict(_counts(30, errors=1), base)[0] == "healthy"
    # as erring as its own baseline: not degraded
    erring = _counts(60, errors=15)
    assert spread.verdict(_counts(20, errors=6), erring)[0] != "degraded"
    assert spread.verdict(_counts(20, errors=6), None)[0] == "degraded"
    # a rise of a few points, however sure, is below the ratio: never degraded
    assert spread.verdict(_counts(400, errors=30), base)[0] != "degraded"


def test_the_tail_of_the_binomial() -> None:
    assert spread.tail(0, 5, 0.3) == 1.0
    assert spread.tail(6, 5, 0.3) == 0.0
    assert abs(spread.tail(5, 5, 0.5) - 1 / 32) < 1e-12
    assert abs(spread.tail(1, 2, 0.5) - 0.75) < 1e-12


def test_windows_leave_out_the_settle_after_each_change() -> None:
    assert spread.left_out(0, 10, []) == [(0, 10)]
    assert spread.left_out(0, 10, [(2, 4.5), (4, 6), (9, 12)]) == [(0, 2), (6, 9)]
    assert spread.left_out(0, 10, [(-5, 20)]) == []


def test_calls_are_counted_exactly_from_the_counters_across_a_restart() -> None:
    """Counters read at the boundaries; one that went down restarted from zero."""
    values = {
        0.0: {("cart-0", "ok"): 10, ("cart-0", "error"): 0, ("cart-1", "ok"): 5},
        5.0: {("cart-0", "ok"): 14, ("cart-0", "error"): 6, ("cart-1", "ok"): 2},
    }

    def query(promql: str, at: float) -> list[dict[str, object]]:
        rows = []
        for (instance, outcome), v in values[at].items():
            metric = {"job": "checkout", "instance": instance, "upstream": "cart"}
            if "outcome" in promql and outcome == "ok":
                continue
            if "outcome" not in promql:
                # calls: every outcome; fast: the successful ones
                total = (
                    sum(n for (i, _o), n in values[at].items() if i == instance)
                    if "le=" not in promql
                    else values[at].get((instance, "ok"), 0)
                )
                if outcome == "error":
                    continue
                v = total
            rows.append({"metric": metric, "value": str(v)})
        return rows

    c = spread.counts(query, [(0.0, 5.0)])[("cart", "checkout")]
    # cart-0: 10 -> 20 calls, 0 -> 6 errors; cart-1 restarted: 2 calls since.
    assert (c.calls, c.errors, c.slow) == (12, 6, 6)


def test_the_spread_goes_from_where_the_fault_acts_towards_the_callers() -> None:
    edges = [("catalog", "frontend"), ("catalog", "recommendation"), ("shipping", "checkout")]
    assert spread.connected(edges, ["catalog-0"]) == edges[:2]
    assert spread.connected(edges, ["checkout->shipping"]) == [("shipping", "checkout")]
    # A failure at frontend does not make recommendation's calls to catalog fail.
    assert spread.connected(edges, ["frontend"]) == [("catalog", "frontend")]
    # Redis down: its callers, then theirs; a blip between catalog and frontend is not its.
    degraded = [
        ("redis", "cart"),
        ("cart", "checkout"),
        ("cart", "frontend"),
        ("checkout", "frontend"),
        ("catalog", "frontend"),
        ("postgres", "catalog"),
    ]
    assert spread.connected(degraded, ["redis"]) == sorted(degraded[:4])
    # A service whose own calls fail (a wrong upstream): those calls, then its callers.
    wrong = [("currency", "checkout"), ("checkout", "frontend"), ("currency", "payment")]
    assert spread.connected(wrong, ["checkout"]) == sorted(wrong[:2])


QUIET = GroundTruth(incident=False, benign=["cart", "checkout->shipping", "payment"])


def test_a_control_passes_only_with_its_benign_events_named() -> None:
    """Example 9: "no incident" must say what explains what the agent saw."""
    none = SreSubmission(incident=False)
    passes, metrics = judge_answer(QUIET, none)
    assert passes["detection"] and not passes["localization"]
    assert metrics["benign_recall"] == 0.0 and not metrics["benign_pass"]
    named = SreSubmission(incident=False, benign=["cart-1", "shipping", "checkout", "payment"])
    assert judge_answer(QUIET, named)[0]["localization"]
    # One event missing: fails; one extra name among four: passes; a list of everything: fails.
    short = SreSubmission(incident=False, benign=["cart", "payment"])
    assert not judge_answer(QUIET, short)[0]["localization"]
    extra = named.model_copy(update={"benign": [*named.benign, "currency"]})
    assert judge_answer(QUIET, extra)[0]["localization"]
    every = SreSubmission(incident=False, benign=topology.entities())
    assert not judge_answer(QUIET, every)[0]["localization"]
    # Root causes on a control still fail it.
    blamed = named.model_copy(update={"root_causes": ["cart"]})
    assert not judge_answer(QUIET, blamed)[0]["localization"]


def test_a_configuration_cause_is_gone_only_when_its_keys_no_longer_hold() -> None:
    before = {"flags": {"audit_trail": False, "promo": True}, "pool_size": 8, "release": "1.0"}
    after = {"flags": {"audit_trail": True, "promo": True}, "pool_size": 8, "release": "1.0"}
    causes = cause.changed("cart", before, after)
    assert [(c.path, c.value) for c in causes] == [(("flags", "audit_trail"), True)]
    assert cause.left(lambda e: after, causes) == ["cart: flags.audit_trail is still True"]
    assert cause.left(lambda e: before, causes) == []
    # A flag is read by its truth: another value that keeps it on leaves the cause in place.
    for on in (1, "on", "yes", [1]):
        still = {**after, "flags": {"audit_trail": on, "promo": True}}
        assert cause.left(lambda e, d=still: d, causes), on
    for off in (0, "", None):
        dropped = {**after, "flags": {"audit_trail": off, "promo": True}}
        assert not cause.left(lambda e, d=dropped: d, causes), off
    # A removed key is a cause too: back when the key is there again.
    records = {"records": {"catalog.svc": "127.0.0.1", "cart.svc": "127.0.0.1"}}
    missing = {"records": {"cart.svc": "127.0.0.1"}}
    gone = cause.changed("dns", records, missing)
    assert [c.path for c in gone] == [("records", "catalog.svc")]
    assert cause.left(lambda e: missing, gone) and not cause.left(lambda e: records, gone)
    # An unreadable configuration shows no fix.
    assert cause.left(lambda e: None, causes) == ["cart: its configuration cannot be read"]
