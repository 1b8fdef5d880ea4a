"""The entity partition and the split rule of the generated sandbox tasks."""

from __future__ import annotations

from infra.sandbox.tasks.generators import splits
from webgym_common.choices import Split

TEST = "product:Cobalt Pulse 311"  # a held-out entity (sha256-based: stable across runs)
TRAIN = "product:Acme Volt 500"


def test_partition_is_a_stable_hash() -> None:
    assert splits.is_test_entity(TEST) and not splits.is_test_entity(TRAIN)
    names = [f"product:p{i}" for i in range(2000)]
    share = sum(map(splits.is_test_entity, names)) / len(names)
    assert abs(share - splits.TEST_SHARE / 100) < 0.03


def test_a_task_takes_the_side_of_its_entities_and_a_mixed_one_is_dropped() -> None:
    assert splits.split_of("shop-price", [TRAIN]) == Split.TRAIN
    assert splits.split_of("shop-price", [TEST]) == Split.TEST
    assert splits.keep("shop-price", [TRAIN]) and splits.keep("shop-price", [TEST, TEST])
    assert not splits.keep("shop-price", [TRAIN, TEST])


def test_held_out_templates_are_ood_and_keep_only_held_out_entities() -> None:
    ood = next(iter(splits.OOD_TEMPLATES))
    assert splits.split_of(ood, [TRAIN]) == Split.OOD
    assert splits.keep(ood, [TEST]) and not splits.keep(ood, [TEST, TRAIN])
    assert splits.keep("shop-price", [TRAIN])
