"""Which split a sandbox task belongs to: train, validation or test (held-out entities), or
ood (held-out templates), and which generated train tasks form the rollout pool. Generated
and hand-written tasks follow the same split rule.

**Entity split.** Every task names the things it is about in `entities` ("product:Cobalt
Pulse 311", "article:Marlow", "thread:Rome in three days", "route:Lisbon to Berlin",
"member:bob"): the products, articles, threads, routes or members whose facts its answer or
steps depend on. An entity's hash value is a stable hash of its name, 0..99 (sha256, so the
partition survives Python's hash seed and any reordering of the data): below `TEST_SHARE` it
is a test entity, in the next `VALIDATION_SHARE` a validation entity, otherwise a train one.
Wiki articles are the exception: they are held out by *region* (the country an article
belongs to: a city's country, a person's birthplace's country, a river's first country...),
whole regions in hash order until a quarter of the articles is held out for test, then the
next regions in the same order until at least a tenth more is set aside for validation (one
region, a fifth of the articles: regions come whole). The wiki's links run mostly inside a
region, so a per-article hash would leave almost no chain "two links deep" entirely on one
side, and a region seen in training would leak neighbouring facts into the held-out articles.
The test side is the one from before validation existed: validation only took train
entities.

A task is "test", "validation" or "train" when all its entities are on that side, and "train"
when it has none (the hostile pages). A task mixing sides is dropped (`keep`): re-routing it
to either side would put the other side's entity into it, and the promise is two-sided: a
test (or validation) task's product, article, thread, route or member never appears in a
train task, nor in a task of the other held-out split, and vice versa. For the generated
tasks the cost is that multi-entity templates (wiki chains, brand filters, a thread and its
member) keep fewer tasks; the generators draft enough that every template keeps train and
test (validation, a tenth, misses a few templates). Drafts are numbered as before validation
existed (`numbered`), so a test task keeps its id. A hand-written task mixing sides is left
out of sandbox_tasks.jsonl too, and build_tasks.MIXED lists it with the reason (the build
fails when the table and this rule disagree).

**Rollout pool (inside train).** The same partition one level down: train entities whose
hash value lies in the next `POOL_SHARE` after validation (35..44), and the next wiki region
in the same order (Pellucia: its country, a city and a person), are *pool entities*. A
generated train task whose entities are all pool entities is in the rollout pool (its task
line says `"pool": "rollout"`): a fresh task for the policy to explore, never in the
demonstration bank nor teacher-forced (webgym_common.tasks.in_rollout_pool). One with none is
a bank task; one mixing both is dropped (`pool_apart`), so no generated bank task names a
pool entity and no pool task a bank one. The pool's entities are few, so the generators draft
more instances over them (`Draft.pool_only`: other specs, the other half of the catalogue,
other posts, other dates), kept only in the pool. The hand-written tasks have no pool (a
few hand-written bank tasks name a pool entity, under templates of their own).

**Template split (ood).** WebGym's out-of-distribution test holds out whole task kinds. Here
the held-out kind is *comparison*: reading the same attribute on two pages (two products, two
articles, two search dates) and reporting the winner. The three comparison templates
(`OOD_TEMPLATES`, one per site that has comparable numbers) never produce train or test tasks,
so a policy trained on the train split has looked up single facts, followed links, filtered,
logged in and booked, but never weighed two pages against each other. The hand-written
comparisons (`HAND_OOD_TEMPLATES`: several products' pages, two countries, two dates) are of
that kind and follow the same rule. An ood task is also drawn only from test entities
(`keep`): its entities must never appear in a train or validation task either, so ood
measures the new kind on unseen things, not the new kind on memorised facts (it may share
entities with test tasks: both are held out); a comparison over any other entity is dropped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from environments import wiki_data
from webgym_common.choices import Split

TEST_SHARE = 25  # percent of entities held out for the test split
VALIDATION_SHARE = 10  # percent of entities set aside for validation, next after the test ones
POOL_SHARE = 10  # percent of entities whose train tasks form the rollout pool, next again
OOD_TEMPLATES = frozenset({"shop-compare-spec", "wiki-compare", "travel-compare-days"})
# The hand-written tasks of the held-out kind (build_tasks.py): they weigh pages against each
# other too, so they follow the ood rule, not the entity rule.
HAND_OOD_TEMPLATES = frozenset({"hand-shop-compare", "hand-wiki-compare",
                                "hand-travel-compare-days"})
# The infobox row naming an article's country, by category (people go via their birthplace).
_REGION_ROW = {"cities": "Country", "landmarks": "Country", "rivers": "Countries",
               "languages": "Spoken in", "currencies": "Used in", "people": "Birthplace"}


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def hash_value(entity: str) -> int:
    """An entity's place in the partition, 0..99: the first 4 bytes of sha256 modulo 100."""
    return int.from_bytes(_digest(entity)[:4], "big") % 100


def region_of(title: str) -> str:
    """The country a wiki article belongs to (the first one its region row links)."""
    article = wiki_data.BY_TITLE[title]
    if article.category == "countries":
        return title
    raw = dict(article.facts)[_REGION_ROW[article.category]]
    first = re.match(r"\[\[([^\]|]+)", raw)
    assert first, (title, raw)
    return region_of(first.group(1))


def _region_sides() -> tuple[frozenset[str], frozenset[str]]:
    """(test regions, validation regions): regions in hash order until at least TEST_SHARE
    percent of the articles are held out, then the next ones until at least VALIDATION_SHARE
    percent more are (the test regions are the same as before validation existed)."""
    sizes: dict[str, int] = {}
    for a in wiki_data.ARTICLES:
        sizes[region_of(a.title)] = sizes.get(region_of(a.title), 0) + 1
    order = iter(sorted(sizes, key=lambda r: _digest(f"region:{r}")))
    sides: list[list[str]] = [[], []]
    for side, share in zip(sides, (TEST_SHARE, VALIDATION_SHARE), strict=True):
        while sum(sizes[r] for r in side) * 100 < share * len(wiki_data.ARTICLES):
            side.append(next(order))
    return frozenset(sides[0]), frozenset(sides[1])


HELD_OUT_REGIONS, VALIDATION_REGIONS = _region_sides()


def _pool_regions() -> frozenset[str]:
    """The first train region in hash order (the next after the test and validation ones):
    one region, since the one after it would put half of the train articles in the pool."""
    regions = {region_of(a.title) for a in wiki_data.ARTICLES}
    order = sorted(regions - HELD_OUT_REGIONS - VALIDATION_REGIONS,
                   key=lambda r: _digest(f"region:{r}"))
    return frozenset(order[:1])


POOL_REGIONS = _pool_regions()


def side_of(entity: str) -> Split:
    """The fixed entity partition (test, validation or train): articles by region, anything
    else by its hash value (test below TEST_SHARE, validation in the next VALIDATION_SHARE)."""
    kind, _, name = entity.partition(":")
    if kind == "article":
        region = region_of(name)
        return (Split.TEST if region in HELD_OUT_REGIONS
                else Split.VALIDATION if region in VALIDATION_REGIONS else Split.TRAIN)
    value = hash_value(entity)
    return (Split.TEST if value < TEST_SHARE
            else Split.VALIDATION if value < TEST_SHARE + VALIDATION_SHARE else Split.TRAIN)


def in_pool(entity: str) -> bool:
    """Whether a train entity is a rollout-pool one: an article of a pool region, anything
    else with a hash value in the `POOL_SHARE` after validation's. Held-out entities never are."""
    if side_of(entity) != Split.TRAIN:
        return False
    kind, _, name = entity.partition(":")
    if kind == "article":
        return region_of(name) in POOL_REGIONS
    low = TEST_SHARE + VALIDATION_SHARE
    return low <= hash_value(entity) < low + POOL_SHARE


def pool_apart(entities: Iterable[str]) -> bool:
    """Whether a train task keeps the pool apart from the bank: its entities all pool
    entities or none (a mixed one is dropped, as `keep` drops a task mixing splits)."""
    return len({in_pool(e) for e in entities}) <= 1


def pooled(entities: Iterable[str]) -> bool:
    """Whether a kept train task is in the rollout pool: it has entities, all pool ones."""
    listed = list(entities)
    return bool(listed) and all(map(in_pool, listed))


def is_test_entity(entity: str) -> bool:
    return side_of(entity) == Split.TEST


def is_ood_template(template: str) -> bool:
    return template in OOD_TEMPLATES or template in HAND_OOD_TEMPLATES


def keep(template: str, entities: Iterable[str]) -> bool:
    """Whether a task is kept: its entities all on one side of the partition, and on the
    test side for an ood template. A task without entities is kept (it is train)."""
    sides = {side_of(e) for e in entities}
    return sides <= {Split.TEST} if is_ood_template(template) else len(sides) <= 1


def numbered(template: str, entities: Iterable[str]) -> bool:
    """Whether a draft counts in its template's numbering: its entities all test or none
    (all test for an ood template), the rule before the validation split. Numbering these,
    not the kept ones, leaves the test and ood ids as they were (generators/build.py)."""
    held = [side_of(e) == Split.TEST for e in entities]
    return all(held) if is_ood_template(template) else all(held) or not any(held)


def split_of(template: str, entities: Iterable[str]) -> Split:
    """The split of a kept task (`keep` first: a mixed task has no split)."""
    if is_ood_template(template):
        return Split.OOD
    sides = {side_of(e) for e in entities}
    assert len(sides) <= 1, f"{template} mixes {sorted(sides)}: keep() drops it"
    return sides.pop() if sides else Split.TRAIN
