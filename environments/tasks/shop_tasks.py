"""Tasks for the sandbox shop. Answers are computed from the catalogue, never typed in.

Each task names its template (its kind of question) and the products its answer or steps
depend on: the one it looks up, or every product of the list it picks from (build_tasks
decides its split from them)."""

from __future__ import annotations

from typing import Any

from environments import shop_data as d
from environments.layout import money
from environments.tasks.common import (
    Action,
    answer,
    button,
    click,
    go_back,
    link,
    number,
    scroll_down,
    task,
    type_,
)


def _p(name: str) -> d.Product:
    return next(p for p in d.PRODUCTS if p.name == name)


def _search(text: str) -> Action:
    return type_("searchbox", "Search products", text)


def _open(name: str) -> list[Action]:
    """Search for a product by name and open its page."""
    return [_search(name), link(name)]


def _cheapest(items: list[d.Product]) -> d.Product:
    return min(items, key=lambda p: p.price)


def _top_rated(items: list[d.Product]) -> d.Product:
    best = max(p.rating for p in items)
    top = [p for p in items if p.rating == best]
    assert len(top) == 1, "ambiguous top-rated product"
    return top[0]


def _t(n: int, instruction: str, sub: str, diff: int, facts: list[tuple[str, list[str]]],
       actions: list[Action], *, template: str, about: list[d.Product],
       **kw: Any) -> dict[str, Any]:
    return task(f"shop-{n:03d}", instruction, site="shop", subdomain=sub, path="/shop/",
                difficulty=diff, facts=facts, actions=actions, template=template,
                entities=[f"product:{p.name}" for p in about], **kw)


def _checkout(name: str, address: str) -> list[Action]:
    return [link("Proceed to checkout"), type_("textbox", "Full name", name),
            type_("textbox", "Shipping address", address)]


def tasks() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    p = _p("Cobalt Pulse 311")
    out.append(_t(1, f"What is the price of the {p.name} phone on Gadget Depot?", "product-lookup",
                  1, [("Product price", [f"The {p.name} page shows the price {money(p.price)}"])],
                  [*_open(p.name), answer(money(p.price))],
                  template="hand-shop-price", about=[p]))
    p = _p("Cobalt Atlas 320")
    out.append(_t(2, f"How much RAM does the {p.name} laptop have?", "product-lookup", 1,
                  [("RAM spec", [f"The {p.name} specifications list RAM {p.specs['RAM']}"])],
                  [_search("Atlas"), link(p.name), answer(p.specs["RAM"])],
                  template="hand-shop-spec", about=[p]))
    p = _p("Acme Lumen 964")
    out.append(_t(3, f"What is the refresh rate of the {p.name} monitor?", "product-lookup", 2,
                  [("Spec", [f"{p.name} refresh rate is {p.specs['Refresh rate']}"])],
                  [link("Monitors"), link(p.name), answer(p.specs["Refresh rate"])],
                  template="hand-shop-spec", about=[p]))
    p = _p("Dynamo Lens 303")
    out.append(_t(4, f"Which sensor type does the {p.name} camera use?", "product-lookup", 2,
                  [("Spec", [f"{p.name} sensor is {p.specs['Sensor']}"])],
                  [link("Cameras"), link(p.name), answer(p.specs["Sensor"])],
                  template="hand-shop-spec", about=[p]))
    hits = d.search("Everlight")
    out.append(_t(5, "Search Gadget Depot for Everlight. How many products are found?", "search",
                  3, [("Result count", [f"The search for Everlight shows {len(hits)} results"])],
                  [_search("Everlight"), scroll_down(), answer(f"{len(hits)} results")],
                  template="hand-shop-search-count", about=hits))
    best = _top_rated(d.in_category("headphones"))
    out.append(_t(6, "Which headphones on Gadget Depot have the highest customer rating?",
                  "sorting", 3, [("Top rated", [f"{best.name} is rated {best.rating} out of 5, "
                                                "the highest among headphones"])],
                  [link("Headphones"), link("Top rated first"), link(best.name),
                   answer(best.name)],
                  template="hand-shop-list-top", about=d.in_category("headphones")))
    p = _p("Borealis Comet 751")
    out.append(_t(7, f"Is the {p.name} phone in stock at Gadget Depot?", "product-lookup", 2,
                  [("Stock", [f"The {p.name} page says it is out of stock"])],
                  [*_open(p.name), answer("Out of stock")],
                  template="hand-shop-stock", about=[p]))
    cheap = _cheapest(d.in_category("phones"))
    out.append(_t(8, "Find the cheapest phone on Gadget Depot. What is its battery capacity?",
                  "sorting", 4,
                  [("Cheapest phone", [f"{cheap.name} is the cheapest phone at "
                                       f"{money(cheap.price)}"]),
                   ("Battery", [f"{cheap.name} battery is {cheap.specs['Battery']}"])],
                  [link("Phones"), link("Lowest price first"), link(cheap.name),
                   answer(cheap.specs["Battery"])],
                  template="hand-shop-list-top", about=d.in_category("phones")))
    cheap = _cheapest(d.in_category("monitors", ["Acme"]))
    out.append(_t(9, "Filter the Monitors category to the Acme brand. Which Acme monitor is the "
                  "cheapest?", "filtering", 4,
                  [("Filtered list", ["The monitor list is filtered to Acme"]),
                   ("Cheapest", [f"{cheap.name} costs {money(cheap.price)}"])],
                  [link("Monitors"), click("checkbox", "Acme"), button("Apply filters"),
                   link("Lowest price first"), answer(cheap.name)],
                  template="hand-shop-list-top", about=d.in_category("monitors", ["Acme"])))
    band = _top_rated(d.in_category("keyboards", None, 100, 130))
    out.append(_t(10, "Among keyboards priced between $100 and $130, which one has the best "
                  "rating?", "filtering", 5,
                  [("Price filter", ["Keyboards are filtered to $100-$130"]),
                   ("Best rated", [f"{band.name} is rated {band.rating} out of 5"])],
                  [link("Keyboards"), number("Min price", "100"), number("Max price", "130"),
                   link("Top rated first"), answer(band.name)],
                  template="hand-shop-list-top",
                  about=d.in_category("keyboards", None, 100, 130)))
    p = _p("Dynamo Bass 712")
    total = d.cart_totals({p.slug: 2})[2]
    out.append(_t(11, f"Add 2 units of {p.name} to the cart. What is the order total shown in "
                  "the cart?", "cart", 5,
                  [("Cart", [f"The cart holds 2 × {p.name}"]),
                   ("Total", [f"The order total is {money(total)}"])],
                  [*_open(p.name), number("Quantity", "2"), answer(money(total))],
                  template="hand-shop-cart", about=[p]))
    p = _p("Dynamo Tactile 935")
    ship = d.cart_totals({p.slug: 1})[1]
    out.append(_t(12, f"Put one {p.name} keyboard in the cart. How much is shipping?", "cart", 4,
                  [("Cart", [f"The cart holds 1 × {p.name}"]),
                   ("Shipping", [f"Shipping is {money(ship)}"])],
                  [*_open(p.name), button("Add to cart"), answer(money(ship))],
                  template="hand-shop-cart", about=[p]))
    nc = sorted(d.in_category("headphones", None, None, 200), key=lambda x: x.price)
    first_nc = next(x for x in nc if x.specs["Noise cancelling"] == "Yes")
    skipped = nc[: nc.index(first_nc)]
    steps: list[Action] = [link("Headphones"), number("Max price", "200"),
                           link("Lowest price first")]
    for x in skipped:
        steps += [link(x.name), go_back()]
    out.append(_t(13, "What is the cheapest pair of headphones under $200 that has noise "
                  "cancelling?", "comparison", 6,
                  [("Noise cancelling", [f"{first_nc.name} has noise cancelling: Yes"]),
                   ("Cheapest", [f"{first_nc.name} costs {money(first_nc.price)}, and every "
                                 "cheaper pair under $200 lacks noise cancelling"])],
                  [*steps, link(first_nc.name), answer(first_nc.name)],
                  template="hand-shop-compare", about=nc))
    p = _p("Acme Volt 500")
    rel = d.related(p)[0]
    out.append(_t(14, f"Open the {p.name} page. What is the battery life of the first product "
                  "listed under 'Customers also viewed'?", "navigation", 5,
                  [("Related", [f"{rel.name} is the first product under Customers also viewed"]),
                   ("Battery", [f"{rel.name} battery life is {rel.specs['Battery life']}"])],
                  [*_open(p.name), link(rel.name), answer(rel.specs["Battery life"])],
                  template="hand-shop-related", about=[p, rel]))
    cobalt = _top_rated(d.in_category("laptops", ["Cobalt"]))
    out.append(_t(15, "How much does the best-rated Cobalt laptop weigh?", "filtering", 7,
                  [("Best Cobalt laptop", [f"{cobalt.name} is the best-rated Cobalt laptop"]),
                   ("Weight", [f"{cobalt.name} weighs {cobalt.specs['Weight']}"])],
                  [link("Laptops"), click("checkbox", "Cobalt"), button("Apply filters"),
                   link("Top rated first"), link(cobalt.name), answer(cobalt.specs["Weight"])],
                  template="hand-shop-list-top", about=d.in_category("laptops", ["Cobalt"])))
    kb = [x for x in d.in_category("keyboards", ["Borealis"], sort="price_asc") if x.stock]
    cart = {kb[0].slug: 1}
    out.append(_t(16, "Buy the cheapest Borealis keyboard that is in stock. Check out as "
                  "'Ada Lovelace', shipping address '12 Analytical Way'. What is the order "
                  "number?", "checkout", 7,
                  [("Product", [f"{kb[0].name} is the cheapest in-stock Borealis keyboard"]),
                   ("Order", [f"An order containing {kb[0].name} is placed",
                              f"The order number is {d.order_number(cart)}"])],
                  [link("Keyboards"), click("checkbox", "Borealis"), button("Apply filters"),
                   link("Lowest price first"), link(kb[0].name), button("Add to cart"),
                   *_checkout("Ada Lovelace", "12 Analytical Way"),
                   answer(d.order_number(cart))],
                  template="hand-shop-checkout",
                  about=d.in_category("keyboards", ["Borealis"], sort="price_asc")))
    a, b = _p("Cobalt Hush 302"), _p("Everlight Stroke 545")
    cart = {a.slug: 1, b.slug: 1}
    out.append(_t(17, f"Add one {a.name} and one {b.name} to the cart, then check out as "
                  "'Grace Hopper', '1 Compiler Lane'. Report the order number.", "checkout", 8,
                  [("Cart", [f"The order contains {a.name} and {b.name}"]),
                   ("Order", [f"The order number is {d.order_number(cart)}",
                              f"The order total is {money(d.cart_totals(cart)[2])}"])],
                  [*_open(a.name), button("Add to cart"), *_open(b.name), button("Add to cart"),
                   *_checkout("Grace Hopper", "1 Compiler Lane"), answer(d.order_number(cart))],
                  template="hand-shop-checkout", about=[a, b]))
    a, b = _p("Acme Volt 500"), _p("Everlight Tune 522")
    total = d.cart_totals({b.slug: 1})[2]
    out.append(_t(18, f"Add the {a.name} and the {b.name} to the cart, then remove the laptop. "
                  "What is the order total now?", "cart", 7,
                  [("Cart", [f"The cart contains only {b.name}"]),
                   ("Total", [f"The order total is {money(total)}"])],
                  [*_open(a.name), button("Add to cart"), *_open(b.name), button("Add to cart"),
                   button(f"Remove {a.name}"), answer(money(total))],
                  template="hand-shop-cart", about=[a, b]))
    cams = sorted(d.in_category("cameras", None, None, 850), key=lambda x: x.price)

    def zoom(x: d.Product) -> int:
        return int(x.specs["Optical zoom"].rstrip("x"))

    win = max((x for x in cams if x.stock), key=zoom)
    steps = [link("Cameras"), number("Max price", "850")]
    for x in cams:
        if x is not win:
            steps += [link(x.name), go_back()]
    out.append(_t(19, "Among cameras under $850 that are in stock, which has the largest "
                  "optical zoom?", "comparison", 8,
                  [("Candidates", ["Cameras are filtered to a maximum price of $850"]),
                   ("Winner", [f"{win.name} is in stock with {win.specs['Optical zoom']} zoom"])],
                  [*steps, link(win.name), answer(win.name)],
                  template="hand-shop-compare", about=cams))
    a, b = _p("Cobalt Rapid 975"), _p("Acme Lumen 964")
    cart = {a.slug: 3, b.slug: 1}
    out.append(_t(20, f"Buy 3 {a.name} keyboards and 1 {b.name} monitor. Check out as "
                  "'Alan Turing', '7 Enigma Road'. What is the order number?", "checkout", 9,
                  [("Cart", [f"The order has 3 × {a.name} and 1 × {b.name}"]),
                   ("Order", [f"The order number is {d.order_number(cart)}",
                              f"The order total is {money(d.cart_totals(cart)[2])}"])],
                  [*_open(a.name), number("Quantity", "3"), *_open(b.name),
                   button("Add to cart"), *_checkout("Alan Turing", "7 Enigma Road"),
                   answer(d.order_number(cart))],
                  template="hand-shop-checkout", about=[a, b]))
    return out
