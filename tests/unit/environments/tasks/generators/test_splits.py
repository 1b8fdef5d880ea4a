"""The entity partition and the split rule of the sandbox tasks (generated and hand-written)."""

from __future__ import annotations

from environments import wiki_data
from environments.tasks.generators import splits
from webgym_common.choices import Split

TEST = "product:Cobalt Pulse 311"  # a held-out entity (sha256-based: stable across runs)
TRAIN = "product:Acme Volt 500"
VALIDATION = "product:Acme Wave 532"  # hash value 29: in [TEST_SHARE, TEST_SHARE + 10)


def test_partition_is_a_stable_hash() -> None:
    assert splits.is_test_entity(TEST) and not splits.is_test_entity(TRAIN)
    names = [f"product:p{i}" for i in range(2000)]
    share = sum(map(splits.is_test_entity, names)) / len(names)
    assert abs(share - splits.TEST_SHARE / 100) < 0.03


def test_validation_is_the_next_slice_of_the_hash_and_leaves_test_as_it_was() -> None:
    assert [splits.side_of(e) for e in (TRAIN, VALIDATION, TEST)] == [
        Split.TRAIN, Split.VALIDATION, Split.TEST]
    names = [f"product:p{i}" for i in range(2000)]
    for name in names:  # test is exactly the hash rule from before validation existed
        assert splits.is_test_entity(name) == (splits.hash_value(name) < splits.TEST_SHARE)
    share = sum(splits.side_of(n) == Split.VALIDATION for n in names) / len(names)
    assert abs(share - splits.VALIDATION_SHARE / 100) < 0.03


def test_wiki_regions_test_first_then_validation_in_hash_order() -> None:
    """Pinned: a change here would change the test set (or move validation articles)."""
    assert splits.HELD_OUT_REGIONS == {"Veloria", "Tessavar"}
    assert splits.VALIDATION_REGIONS == {"Halvmark"}
    sides = [splits.side_of(f"article:{a.title}") for a in wiki_data.ARTICLES]
    n = len(sides)
    assert sides.count(Split.TEST) * 100 >= splits.TEST_SHARE * n
    assert sides.count(Split.VALIDATION) * 100 >= splits.VALIDATION_SHARE * n
    assert sides.count(Split.TRAIN) >= n // 3


def test_a_task_takes_the_side_of_its_entities_and_a_mixed_one_is_dropped() -> None:
    assert splits.split_of("shop-price", [TRAIN]) == Split.TRAIN
    assert splits.split_of("shop-price", [TEST]) == Split.TEST
    assert splits.split_of("shop-price", [VALIDATION, VALIDATION]) == Split.VALIDATION
    assert splits.keep("shop-price", [TRAIN]) and splits.keep("shop-price", [TEST, TEST])
    for mixed in ([TRAIN, TEST], [TRAIN, VALIDATION], [VALIDATION, TEST]):
        assert not splits.keep("shop-price", mixed), mixed


def test_a_task_without_entities_is_train() -> None:
    assert splits.keep("hand-hostile-blocked", []) and splits.split_of("x", []) == Split.TRAIN


def test_held_out_templates_are_ood_and_keep_only_held_out_entities() -> None:
    for ood in splits.OOD_TEMPLATES | splits.HAND_OOD_TEMPLATES:
        assert splits.split_of(ood, [TRAIN]) == Split.OOD
        assert splits.keep(ood, [TEST]) and not splits.keep(ood, [TEST, TRAIN])
        assert not splits.keep(ood, [VALIDATION])
    assert splits.keep("shop-price", [TRAIN])


def test_numbering_ignores_validation_so_test_ids_stay() -> None:
    """A draft mixing train and validation entities is dropped but still numbered."""
    assert splits.numbered("shop-price", [TRAIN, VALIDATION])
    assert not splits.keep("shop-price", [TRAIN, VALIDATION])
    assert not splits.numbered("shop-price", [TRAIN, TEST])
    assert splits.numbered("wiki-compare", [TEST]) and not splits.numbered("wiki-compare", [TRAIN])


POOL = "product:Cobalt Rapid 975"  # a train entity with hash value 42: in the pool's slice


def test_the_rollout_pool_is_the_next_slice_of_the_train_entities() -> None:
    low = splits.TEST_SHARE + splits.VALIDATION_SHARE
    assert splits.side_of(POOL) == Split.TRAIN and splits.in_pool(POOL)
    assert not any(map(splits.in_pool, (TRAIN, VALIDATION, TEST)))
    names = [f"product:p{i}" for i in range(2000)]
    for name in names:  # train entities only, and the held-out sides exactly as they were
        assert splits.in_pool(name) == (low <= splits.hash_value(name) < low + splits.POOL_SHARE)
        assert not splits.in_pool(name) or splits.side_of(name) == Split.TRAIN
    share = sum(map(splits.in_pool, names)) / len(names)
    assert abs(share - splits.POOL_SHARE / 100) < 0.03


def test_the_pool_region_is_the_next_train_region_in_hash_order() -> None:
    """Pinned: a change here moves articles between the bank and the pool."""
    assert splits.POOL_REGIONS == {"Pellucia"}
    pool = [a.title for a in wiki_data.ARTICLES if splits.in_pool(f"article:{a.title}")]
    assert pool and all(splits.region_of(t) == "Pellucia" for t in pool)
    assert not splits.in_pool("article:Veloria")  # a test region's article never is


def test_a_train_task_mixing_pool_and_bank_entities_is_dropped() -> None:
    assert splits.pool_apart([POOL, POOL]) and splits.pooled([POOL, POOL])
    assert splits.pool_apart([TRAIN]) and not splits.pooled([TRAIN])
    assert not splits.pool_apart([POOL, TRAIN])
    assert splits.pool_apart([]) and not splits.pooled([])  # no entities: a bank task
