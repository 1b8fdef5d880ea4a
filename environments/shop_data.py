"""Deterministic catalogue for the sandbox shop ("Gadget Depot").

Generated from a fixed seed so task answers computed from this module stay valid; the task
builder imports the same functions the server uses.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

BRANDS = ["Acme", "Borealis", "Cobalt", "Dynamo", "Everlight"]

# (slug, display name, base price, model series); brands rotate through the series
CATEGORIES: list[tuple[str, str, int, list[str]]] = [
    ("laptops", "Laptops", 900, ["Volt", "Nimbus", "Atlas", "Quill", "Orbit", "Zephyr", "Summit",
                                 "Pilot"]),
    ("phones", "Phones", 600, ["Nova", "Pulse", "Echo", "Flare", "Ripple", "Comet", "Spark",
                               "Glint"]),
    ("headphones", "Headphones", 150, ["Hush", "Bass", "Tune", "Wave", "Drift", "Calm", "Beat",
                                       "Muse"]),
    ("cameras", "Cameras", 800, ["Lens", "Shutter", "Focus", "Frame", "Aperture", "Vista",
                                 "Prism", "Snap"]),
    ("monitors", "Monitors", 350, ["View", "Panorama", "Crystal", "Horizon", "Clarity", "Spectra",
                                   "Lumen", "Vivid"]),
    ("keyboards", "Keyboards", 90, ["Type", "Clack", "Key", "Tactile", "Stroke", "Press", "Glide",
                                    "Rapid"]),
]

FREE_SHIPPING_OVER = 100.0
SHIPPING_FEE = 7.50


@dataclass(frozen=True)
class Product:
    slug: str
    name: str
    brand: str
    category: str  # category slug
    price: float
    rating: float
    reviews: int
    stock: int
    specs: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


def _specs(category: str, rng: random.Random) -> dict[str, str]:
    if category == "laptops":
        return {
            "RAM": f"{rng.choice([8, 16, 32, 64])} GB",
            "Storage": f"{rng.choice([256, 512, 1024, 2048])} GB SSD",
            "Screen size": f"{rng.choice([13.3, 14.0, 15.6, 16.0])} inches",
            "Weight": f"{rng.randint(11, 24) / 10:.1f} kg",
            "Battery life": f"{rng.randint(6, 22)} hours",
        }
    if category == "phones":
        return {
            "Storage": f"{rng.choice([64, 128, 256, 512])} GB",
            "Screen size": f"{rng.choice([5.8, 6.1, 6.4, 6.7])} inches",
            "Camera": f"{rng.choice([12, 48, 50, 108])} MP",
            "Battery": f"{rng.randint(30, 55) * 100} mAh",
            "Colour": rng.choice(["Graphite", "Silver", "Ocean blue", "Coral", "Forest green"]),
        }
    if category == "headphones":
        return {
            "Type": rng.choice(["Over-ear", "On-ear", "In-ear"]),
            "Noise cancelling": rng.choice(["Yes", "No"]),
            "Battery life": f"{rng.randint(8, 60)} hours",
            "Weight": f"{rng.randint(5, 35) * 10} g",
            "Wireless": rng.choice(["Bluetooth 5.3", "Bluetooth 5.0", "Wired only"]),
        }
    if category == "cameras":
        return {
            "Sensor": rng.choice(["Full frame", "APS-C", "Micro Four Thirds", "1-inch"]),
            "Megapixels": f"{rng.choice([20, 24, 26, 33, 45, 61])} MP",
            "Optical zoom": f"{rng.choice([1, 3, 5, 10, 24])}x",
            "Weight": f"{rng.randint(30, 95) * 10} g",
            "Video": rng.choice(["4K 30fps", "4K 60fps", "8K 30fps", "1080p 60fps"]),
        }
    if category == "monitors":
        return {
            "Screen size": f"{rng.choice([24, 27, 32, 34])} inches",
            "Resolution": rng.choice(["1920x1080", "2560x1440", "3840x2160", "3440x1440"]),
            "Refresh rate": f"{rng.choice([60, 75, 144, 165, 240])} Hz",
            "Panel": rng.choice(["IPS", "VA", "OLED", "TN"]),
        }
    return {
        "Switches": rng.choice(["Red linear", "Brown tactile", "Blue clicky", "Membrane"]),
        "Layout": rng.choice(["Full size", "Tenkeyless", "75%", "60%"]),
        "Wireless": rng.choice(["Yes", "No"]),
        "Backlight": rng.choice(["RGB", "White", "None"]),
    }


def _build() -> list[Product]:
    rng = random.Random(20260601)
    products: list[Product] = []
    used_prices: set[float] = set()
    for c_idx, (slug, _name, base, series) in enumerate(CATEGORIES):
        for i, ser in enumerate(series):
            brand = BRANDS[(i + c_idx) % len(BRANDS)]
            number = rng.choice([3, 5, 7, 9]) * 100 + i * 10 + c_idx
            name = f"{brand} {ser} {number}"
            price = round(base * rng.uniform(0.45, 1.9)) - 0.01
            while price in used_prices:  # unique prices keep "cheapest" questions unambiguous
                price += 1.0
            used_prices.add(price)
            products.append(
                Product(
                    slug=name.lower().replace(" ", "-"),
                    name=name,
                    brand=brand,
                    category=slug,
                    price=price,
                    rating=round(rng.uniform(2.8, 4.95), 1),
                    reviews=rng.randint(3, 900),
                    stock=0 if (i + c_idx) % 7 == 6 else rng.randint(1, 40),
                    specs=_specs(slug, rng),
                )
            )
    return products


PRODUCTS: list[Product] = _build()
BY_SLUG: dict[str, Product] = {p.slug: p for p in PRODUCTS}
CATEGORY_NAMES: dict[str, str] = {c[0]: c[1] for c in CATEGORIES}


def in_category(
    category: str,
    brands: list[str] | None = None,
    min_price: float | None = None,
    max_price: float | None = None,
    sort: str = "",
) -> list[Product]:
    items = [p for p in PRODUCTS if p.category == category]
    if brands:
        items = [p for p in items if p.brand in brands]
    if min_price is not None:
        items = [p for p in items if p.price >= min_price]
    if max_price is not None:
        items = [p for p in items if p.price <= max_price]
    if sort == "price_asc":
        items.sort(key=lambda p: p.price)
    elif sort == "price_desc":
        items.sort(key=lambda p: -p.price)
    elif sort == "rating":
        items.sort(key=lambda p: (-p.rating, p.price))
    return items


def search(query: str) -> list[Product]:
    terms = query.lower().split()
    if not terms:
        return []

    def hay(p: Product) -> str:
        return f"{p.name} {p.brand} {CATEGORY_NAMES[p.category]}".lower()

    return [p for p in PRODUCTS if all(t in hay(p) for t in terms)]


def related(product: Product, n: int = 3) -> list[Product]:
    """Same-category neighbours by price: a stable "customers also viewed" list."""
    peers = sorted(in_category(product.category), key=lambda p: abs(p.price - product.price))
    return [p for p in peers if p.slug != product.slug][:n]


def cart_totals(cart: dict[str, int]) -> tuple[float, float, float]:
    subtotal = round(sum(BY_SLUG[s].price * q for s, q in cart.items() if s in BY_SLUG), 2)
    shipping = 0.0 if subtotal == 0 or subtotal > FREE_SHIPPING_OVER else SHIPPING_FEE
    return subtotal, shipping, round(subtotal + shipping, 2)


def order_number(cart: dict[str, int]) -> str:
    """Same cart, same number: graders can check it without seeing the session."""
    canon = "|".join(f"{s}:{q}" for s, q in sorted(cart.items()) if q > 0)
    return "GD-" + hashlib.sha256(canon.encode()).hexdigest()[:8].upper()
