"""Sandbox shop ("Gadget Depot"): search, category filters, product specs, cookie cart, checkout.

The cart lives entirely in a cookie ("slug:qty|slug:qty") so every browser context starts
empty and the server keeps no shared state between concurrent agents.
"""

from __future__ import annotations

from aiohttp import web

from environments import shop_data as data
from environments.layout import esc, link, money, notice, render, table, text_field, url

BRAND = "Gadget Depot"
NAV = [("/shop/", "Gadget Depot home"), ("/shop/cart", "Cart"), ("/", "All sandbox sites")]
CART_COOKIE = "gd_cart"


def _cart(request: web.Request) -> dict[str, int]:
    cart: dict[str, int] = {}
    for part in request.cookies.get(CART_COOKIE, "").split("|"):
        slug, _, qty = part.partition(":")
        if slug in data.BY_SLUG and qty.isdigit() and int(qty) > 0:
            cart[slug] = int(qty)
    return cart


def _set_cart(resp: web.StreamResponse, cart: dict[str, int]) -> None:
    value = "|".join(f"{s}:{q}" for s, q in cart.items() if q > 0)
    if value:
        resp.set_cookie(CART_COOKIE, value, path="/shop")
    else:
        resp.del_cookie(CART_COOKIE, path="/shop")


def _page(request: web.Request, title: str, body: str, status: int = 200) -> web.Response:
    count = sum(_cart(request).values())
    q = esc(request.query.get("q", "")) if request.path == "/shop/search" else ""
    search = (
        '<form role="search" action="/shop/search" method="get">'
        f'<label for="shop-q">Search products</label>'
        f'<input id="shop-q" type="search" name="q" value="{q}">'
        "<button type=\"submit\">Search</button></form>"
        f"<p>Items in cart: {count}</p>"
    )
    return render(f"{title} | {BRAND}", search + body, brand=BRAND, nav=NAV, status=status)


def _product_rows(items: list[data.Product]) -> list[list[str]]:
    return [
        [
            link(f"/shop/product/{p.slug}", p.name),
            esc(p.brand),
            money(p.price),
            f"{p.rating} out of 5",
            "In stock" if p.stock else "Out of stock",
        ]
        for p in items
    ]


def _product_table(items: list[data.Product], caption: str) -> str:
    if not items:
        return "<p>No products match.</p>"
    return table(["Product", "Brand", "Price", "Rating", "Availability"],
                 _product_rows(items), caption)


async def home(request: web.Request) -> web.Response:
    cats = "".join(f"<li>{link(f'/shop/category/{s}', n)}</li>" for s, n, *_ in data.CATEGORIES)
    best = sorted(data.PRODUCTS, key=lambda p: (-p.rating, p.price))[:4]
    body = (
        "<h1>Welcome to Gadget Depot</h1>"
        f'<section aria-label="Categories"><h2>Shop by category</h2><ul>{cats}</ul></section>'
        f"<h2>Top rated</h2>{_product_table(best, 'Top rated products')}"
        f"<p>Free shipping on orders over {money(data.FREE_SHIPPING_OVER)}.</p>"
    )
    return _page(request, "Home", body)


async def search(request: web.Request) -> web.Response:
    q = request.query.get("q", "").strip()
    hits = data.search(q)
    body = f"<h1>Search results</h1><p>{len(hits)} results for “{esc(q)}”</p>"
    return _page(request, f"Search: {q}", body + _product_table(hits, "Search results"))


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


async def category(request: web.Request) -> web.Response:
    slug = request.match_info["slug"]
    if slug not in data.CATEGORY_NAMES:
        raise web.HTTPNotFound(text="No such category")
    name = data.CATEGORY_NAMES[slug]
    brands = request.query.getall("brand", [])
    lo, hi = _float(request.query.get("min")), _float(request.query.get("max"))
    sort = request.query.get("sort", "")
    items = data.in_category(slug, brands, lo, hi, sort)
    present = sorted({p.brand for p in data.in_category(slug)})
    boxes = "".join(
        f'<input type="checkbox" id="b-{b}" name="brand" value="{b}"'
        f'{" checked" if b in brands else ""}><label for="b-{b}">{b}</label>'
        for b in present
    )
    lo_s = "" if lo is None else f"{lo:g}"
    hi_s = "" if hi is None else f"{hi:g}"
    form = (
        f'<form method="get" action="/shop/category/{slug}" aria-label="Filter products">'
        f"<fieldset><legend>Brand</legend>{boxes}</fieldset>"
        + text_field("min", "Min price", lo_s, kind="number", extra=' min="0" step="any"')
        + text_field("max", "Max price", hi_s, kind="number", extra=' min="0" step="any"')
        + f'<input type="hidden" name="sort" value="{esc(sort)}">'
        '<button type="submit">Apply filters</button> '
        + link(f"/shop/category/{slug}", "Clear filters")
        + "</form>"
    )
    base = [("brand", b) for b in brands] + [("min", lo_s), ("max", hi_s)]
    sorts = [("price_asc", "Lowest price first"), ("price_desc", "Highest price first"),
             ("rating", "Top rated first")]
    sort_links = " | ".join(
        link(url(f"/shop/category/{slug}", base + [("sort", k)]), t) for k, t in sorts
    )
    body = (
        f"<h1>{esc(name)}</h1>{form}<p>Sort: {sort_links}</p>"
        f"<p>Showing {len(items)} of {len(data.in_category(slug))} products</p>"
        + _product_table(items, name)
    )
    return _page(request, name, body)


async def product(request: web.Request) -> web.Response:
    p = data.BY_SLUG.get(request.match_info["slug"])
    if p is None:
        raise web.HTTPNotFound(text="No such product")
    specs = table(["Specification", "Value"], [[esc(k), esc(v)] for k, v in p.specs.items()],
                  "Specifications")
    if p.stock:
        buy = (
            '<form method="post" action="/shop/cart/add">'
            f'<input type="hidden" name="product" value="{p.slug}">'
            + text_field("quantity", "Quantity", "1", kind="number",
                         extra=f' min="1" max="{p.stock}"')
            + '<button type="submit">Add to cart</button></form>'
            f"<p>In stock ({p.stock} left)</p>"
        )
    else:
        buy = "<p>Out of stock. This product cannot be added to the cart.</p>"
    rel = "".join(
        f"<li>{link(f'/shop/product/{r.slug}', r.name)} {money(r.price)}</li>"
        for r in data.related(p)
    )
    body = (
        f'<nav aria-label="Breadcrumb">'
        f"{link(f'/shop/category/{p.category}', data.CATEGORY_NAMES[p.category])}</nav>"
        f"<h1>{esc(p.name)}</h1><p>Brand: {esc(p.brand)}</p>"
        f"<p>Price: {money(p.price)}</p>"
        f"<p>Rating: {p.rating} out of 5 ({p.reviews} reviews)</p>{buy}{specs}"
        f"<h2>Customers also viewed</h2><ul>{rel}</ul>"
    )
    return _page(request, p.name, body)


async def cart_add(request: web.Request) -> web.Response:
    form = await request.post()
    slug = str(form.get("product", ""))
    p = data.BY_SLUG.get(slug)
    if p is None or not p.stock:
        raise web.HTTPBadRequest(text="Product unavailable")
    qty_s = str(form.get("quantity", "1")).strip()
    qty = max(1, int(qty_s)) if qty_s.isdigit() else 1
    cart = _cart(request)
    cart[slug] = min(p.stock, cart.get(slug, 0) + qty)
    resp = web.HTTPSeeOther(url("/shop/cart", {"added": slug, "qty": qty}))
    _set_cart(resp, cart)
    raise resp


async def cart_remove(request: web.Request) -> web.Response:
    form = await request.post()
    cart = _cart(request)
    cart.pop(str(form.get("product", "")), None)
    resp = web.HTTPSeeOther("/shop/cart")
    _set_cart(resp, cart)
    raise resp


def _cart_summary(cart: dict[str, int], removable: bool) -> str:
    rows = []
    for slug, qty in cart.items():
        p = data.BY_SLUG[slug]
        cells = [link(f"/shop/product/{slug}", p.name), money(p.price), str(qty),
                 money(p.price * qty)]
        if removable:
            cells.append(
                '<form class="inline" method="post" action="/shop/cart/remove">'
                f'<input type="hidden" name="product" value="{slug}">'
                f"<button type=\"submit\">Remove {esc(p.name)}</button></form>"
            )
        rows.append(cells)
    headers = ["Product", "Unit price", "Quantity", "Line total"] + (["Action"] if removable
                                                                      else [])
    sub, ship, total = data.cart_totals(cart)
    return (
        table(headers, rows, "Cart contents")
        + f"<p>Subtotal: {money(sub)}</p><p>Shipping: {money(ship)}</p>"
        f"<p><strong>Order total: {money(total)}</strong></p>"
    )


async def cart_page(request: web.Request) -> web.Response:
    cart = _cart(request)
    msg = ""
    added = data.BY_SLUG.get(request.query.get("added", ""))
    if added:
        msg = notice(f"Added {request.query.get('qty', '1')} × {added.name} to your cart.")
    if not cart:
        return _page(request, "Cart", f"<h1>Your cart</h1>{msg}<p>Your cart is empty.</p>")
    body = (
        f"<h1>Your cart</h1>{msg}{_cart_summary(cart, removable=True)}"
        f"<p>{link('/shop/checkout', 'Proceed to checkout')} "
        f"{link('/shop/', 'Continue shopping')}</p>"
    )
    return _page(request, "Cart", body)


def _checkout_form(cart: dict[str, int], name: str, address: str, msg: str) -> str:
    return (
        f"<h1>Checkout</h1>{msg}{_cart_summary(cart, removable=False)}"
        '<form method="post" action="/shop/checkout" aria-label="Shipping details">'
        + text_field("name", "Full name", name)
        + text_field("address", "Shipping address", address)
        + '<button type="submit">Place order</button></form>'
    )


async def checkout(request: web.Request) -> web.Response:
    cart = _cart(request)
    if not cart:
        body = "<h1>Checkout</h1><p>Your cart is empty.</p>" + link("/shop/", "Start shopping")
        return _page(request, "Checkout", body)
    if request.method == "GET":
        return _page(request, "Checkout", _checkout_form(cart, "", "", ""))
    form = await request.post()
    name = str(form.get("name", "")).strip()
    address = str(form.get("address", "")).strip()
    missing = [lbl for lbl, v in (("Full name", name), ("Shipping address", address)) if not v]
    if missing:
        msg = notice("Please fill in: " + ", ".join(missing) + ".")
        return _page(request, "Checkout", _checkout_form(cart, name, address, msg))
    number = data.order_number(cart)
    body = (
        "<h1>Thank you for your order</h1>"
        f"<p>Order number: <strong>{number}</strong></p>"
        f"<p>Shipping to {esc(name)}, {esc(address)}.</p>{_cart_summary(cart, removable=False)}"
        + link("/shop/", "Continue shopping")
    )
    resp = _page(request, f"Order {number}", body)
    _set_cart(resp, {})
    return resp


def routes() -> list[web.RouteDef]:
    return [
        web.get("/shop/", home),
        web.get("/shop/search", search),
        web.get("/shop/category/{slug}", category),
        web.get("/shop/product/{slug}", product),
        web.post("/shop/cart/add", cart_add),
        web.post("/shop/cart/remove", cart_remove),
        web.get("/shop/cart", cart_page),
        web.get("/shop/checkout", checkout),
        web.post("/shop/checkout", checkout),
    ]
