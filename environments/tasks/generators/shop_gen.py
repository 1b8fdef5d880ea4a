"""Generated Gadget Depot tasks: look-ups, cart totals, price filters, comparisons and
checkouts over every product of the catalogue (answers computed from shop_data).

Templates that cover half of the catalogue (price, stock, cart total, checkout) draft the
other half pool-only, and spec look-ups draft a product's other specs pool-only: further
tasks over the rollout pool's products (splits)."""

from __future__ import annotations

import math
import re
from itertools import pairwise

from environments import shop_data as d
from environments.layout import money
from environments.tasks.common import Action, answer, button, link, number, type_
from environments.tasks.generators.draft import Draft, pool_only

NOUN = {"laptops": "laptop", "phones": "phone", "headphones": "headphones",
        "cameras": "camera", "monitors": "monitor", "keyboards": "keyboard"}
# How a spec reads in a question; Yes/No specs are left out (a one-word answer found
# anywhere on the page says little about the page).
SPEC_PHRASE = {"Wireless": "wireless connectivity", "Video": "video mode",
               "Type": "type (over-ear, on-ear or in-ear)", "Switches": "switch type",
               "Panel": "panel type", "Sensor": "sensor type", "Camera": "camera resolution",
               "Battery": "battery capacity", "Optical zoom": "optical zoom"}
# (category, spec, what the winner does, whether the larger number wins)
COMPARABLE = [
    ("laptops", "RAM", "has more RAM", True), ("laptops", "Battery life",
                                              "has the longer battery life", True),
    ("laptops", "Weight", "is lighter", False), ("phones", "Storage", "has more storage", True),
    ("phones", "Camera", "has the higher-resolution camera", True),
    ("phones", "Battery", "has the larger battery", True),
    ("headphones", "Battery life", "has the longer battery life", True),
    ("headphones", "Weight", "is lighter", False),
    ("cameras", "Megapixels", "has more megapixels", True),
    ("cameras", "Optical zoom", "has the larger optical zoom", True),
    ("cameras", "Weight", "is lighter", False),
    ("monitors", "Refresh rate", "has the higher refresh rate", True),
    ("monitors", "Screen size", "has the larger screen", True),
]
BUYERS = [("Ada Lovelace", "12 Analytical Way"), ("Grace Hopper", "1 Compiler Lane"),
          ("Alan Turing", "7 Enigma Road"), ("Katherine Johnson", "3 Orbit Street"),
          ("Edsger Dijkstra", "5 Shortest Path"), ("Barbara Liskov", "9 Substitution Row")]


def _e(p: d.Product) -> str:
    return f"product:{p.name}"


def _open(p: d.Product) -> list[Action]:
    """Search for the product by its full name and open it from the results."""
    return [type_("searchbox", "Search products", p.name), link(p.name)]


def _draft(template: str, instruction: str, sub: str, diff: int,
           facts: list[tuple[str, list[str]]], actions: list[Action],
           products: list[d.Product]) -> Draft:
    return Draft(template, instruction, "shop", sub, diff, facts, actions,
                 [_e(p) for p in products])


def _price(p: d.Product) -> Draft:
    return _draft("shop-price", f"What is the price of the {p.name} {NOUN[p.category]} on "
                  "Gadget Depot?", "product-lookup", 1,
                  [("Price", [f"The {p.name} page shows the price {money(p.price)}"])],
                  [*_open(p), answer(money(p.price))], [p])


def price() -> list[Draft]:
    return ([_price(p) for p in d.PRODUCTS[0::2]]
            + pool_only(_price(p) for p in d.PRODUCTS[1::2]))


def _stock(p: d.Product) -> Draft:
    text = str(p.stock) if p.stock else "Out of stock"
    fact = f"The {p.name} page says {p.stock} left" if p.stock else (
        f"The {p.name} page says it is out of stock")
    return _draft("shop-stock", f"How many units of the {p.name} are left in stock at "
                  "Gadget Depot? Answer 'Out of stock' if there are none.",
                  "product-lookup", 2, [("Stock", [fact])], [*_open(p), answer(text)], [p])


def stock() -> list[Draft]:
    return ([_stock(p) for p in d.PRODUCTS[1::2]]
            + pool_only(_stock(p) for p in d.PRODUCTS[0::2]))


def _spec(p: d.Product, key: str) -> Draft:
    phrase = SPEC_PHRASE.get(key, key if key == "RAM" else key.lower())
    return _draft("shop-spec", f"On Gadget Depot, what is the {phrase} of the {p.name} "
                  f"{NOUN[p.category]}?", "product-lookup", 2,
                  [("Spec", [f"The {p.name} specifications list {key} {p.specs[key]}"])],
                  [link(d.CATEGORY_NAMES[p.category]), link(p.name), answer(p.specs[key])],
                  [p])


def spec() -> list[Draft]:
    """One spec a product (rotating); its other specs pool-only."""
    out: list[Draft] = []
    more: list[Draft] = []
    for i, p in enumerate(d.PRODUCTS):
        keys = [k for k, v in p.specs.items() if v not in ("Yes", "No")]
        key = keys[i % len(keys)]
        out.append(_spec(p, key))
        more += [_spec(p, k) for k in keys if k != key]
    return out + pool_only(more)


def _add(p: d.Product, qty: int) -> Action:
    """Add to the cart from the product page (Enter in Quantity submits the form too)."""
    return button("Add to cart") if qty == 1 else number("Quantity", str(qty))


def _cart_total(i: int, p: d.Product) -> Draft:
    qty = min(p.stock, 2 + i % 2)
    total = money(d.cart_totals({p.slug: qty})[2])
    return _draft("shop-cart-total", f"Add {qty} units of the {p.name} to the cart on "
                  "Gadget Depot. What order total does the cart show?", "cart", 4,
                  [("Cart", [f"The cart holds {qty} × {p.name}"]),
                   ("Total", [f"The order total is {total}"])],
                  [*_open(p), _add(p, qty), answer(total)], [p])


def cart_total() -> list[Draft]:
    return ([_cart_total(i, p) for i, p in enumerate(x for x in d.PRODUCTS[0::2] if x.stock)]
            + pool_only(_cart_total(i, p)
                        for i, p in enumerate(x for x in d.PRODUCTS[1::2] if x.stock)))


def price_filter() -> list[Draft]:
    """Best-rated product in a price band that holds two neighbours by price: every pair of
    the category's price order (splits keeps the pairs entirely on one side). Prices end in
    .99 and differ by at least $1, so [floor(lower), ceil(higher)] holds just the two."""
    out: list[Draft] = []
    for slug, cat, *_ in d.CATEGORIES:
        ordered = d.in_category(slug, sort="price_asc")
        for low, high in pairwise(ordered):
            lo, hi = math.floor(low.price), math.ceil(high.price)
            assert d.in_category(slug, None, lo, hi, "price_asc") == [low, high], (lo, hi)
            if low.rating == high.rating:
                continue  # no single best-rated product
            best = max(low, high, key=lambda p: p.rating)
            out.append(_draft("shop-price-filter", f"Among {cat.lower()} on Gadget Depot priced "
                              f"between ${lo} and ${hi}, which has the best customer rating?",
                              "filtering", 5,
                              [("Filter", [f"{cat} are filtered to ${lo}-${hi}"]),
                               ("Best rated", [f"{best.name} is rated {best.rating} out of 5, "
                                               "the best in that price band"])],
                              [link(cat), number("Min price", str(lo)),
                               number("Max price", str(hi)), link("Top rated first"),
                               answer(best.name)], [low, high]))
    return out


def _num(value: str) -> float:
    found = re.match(r"[\d.]+", value)
    assert found, value
    return float(found.group())


def compare_spec() -> list[Draft]:
    """Every pair within a category, per comparable spec (splits keeps the held-out ones)."""
    out: list[Draft] = []
    for slug, key, does, larger in COMPARABLE:
        items = d.in_category(slug)
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                va, vb = _num(a.specs[key]), _num(b.specs[key])
                if va == vb:
                    continue
                win, lose = (a, b) if (va > vb) == larger else (b, a)
                out.append(_draft("shop-compare-spec", f"Of the {slug} {a.name} and "
                                  f"{b.name} on Gadget Depot, which {does}? Answer with the "
                                  "product name.", "comparison", 6,
                                  [("Both specs", [f"{x.name} lists {key} {x.specs[key]}"
                                                   for x in (a, b)]),
                                   ("Winner", [f"{win.name} {does}"])],
                                  [*_open(lose), *_open(win), answer(win.name)], [a, b]))
    return out


def _checkout(i: int, p: d.Product) -> Draft:
    qty = min(p.stock, 1 + i % 2)
    who, where = BUYERS[i % len(BUYERS)]
    code = d.order_number({p.slug: qty})
    return _draft("shop-checkout", f"Buy {qty} × {p.name} on Gadget Depot. Check out as "
                  f"'{who}', shipping address '{where}'. What is the order number?",
                  "checkout", 7,
                  [("Cart", [f"The order contains {qty} × {p.name}"]),
                   ("Order", [f"The order number is {code}"])],
                  [*_open(p), _add(p, qty), link("Proceed to checkout"),
                   type_("textbox", "Full name", who),
                   type_("textbox", "Shipping address", where), answer(code)], [p])


def checkout() -> list[Draft]:
    return ([_checkout(i, p) for i, p in enumerate(x for x in d.PRODUCTS[1::2] if x.stock)]
            + pool_only(_checkout(i, p)
                        for i, p in enumerate(x for x in d.PRODUCTS[0::2] if x.stock)))


TEMPLATES = [price, stock, spec, cart_total, price_filter, compare_spec, checkout]
