"""Sandbox travel site ("SandTrip"): flight search form, results, booking and confirmation.

Every form can be completed one field at a time (type, press Enter): an incomplete search or
booking re-renders the form with the values kept and names what is still missing. Routes are
also reachable through links that pre-fill origin and destination, so an agent without a
"select option" action can still search any route.
"""

from __future__ import annotations

from datetime import date

from aiohttp import web

from environments import travel_data as data
from environments.layout import esc, link, notice, render, table, text_field, url

BRAND = "SandTrip"
NAV = [("/travel/", "SandTrip home"), ("/travel/routes", "All routes"),
       ("/", "All sandbox sites")]

# A small date-picker: fills the <input type=date> so agents can click a day instead of typing.
_CALENDAR_JS = """
(function () {
  var input = document.getElementById('f-date'), box = document.getElementById('cal');
  if (!input || !box) return;
  var first = new Date(Date.UTC(2026, 5, 1)), last = new Date(Date.UTC(2026, 7, 31));
  var shown = new Date(Date.UTC(2026, 5, 1));
  var months = ['January','February','March','April','May','June','July','August',
                'September','October','November','December'];
  function draw() {
    var y = shown.getUTCFullYear(), m = shown.getUTCMonth();
    document.getElementById('cal-title').textContent = months[m] + ' ' + y;
    var days = document.getElementById('cal-days');
    days.innerHTML = '';
    var n = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
    for (var d = 1; d <= n; d++) {
      var b = document.createElement('button');
      b.type = 'button';
      b.textContent = d;
      b.setAttribute('aria-label', d + ' ' + months[m] + ' ' + y);
      b.dataset.iso = y + '-' + String(m + 1).padStart(2, '0') + '-' + String(d).padStart(2, '0');
      b.onclick = function () { input.value = this.dataset.iso; box.hidden = true; };
      days.appendChild(b);
    }
  }
  document.getElementById('cal-open').onclick = function () { box.hidden = !box.hidden; draw(); };
  document.getElementById('cal-prev').onclick = function () {
    if (shown > first) { shown.setUTCMonth(shown.getUTCMonth() - 1); draw(); } };
  document.getElementById('cal-next').onclick = function () {
    var next = new Date(shown); next.setUTCMonth(next.getUTCMonth() + 1);
    if (next <= last) { shown = next; draw(); } };
})();
"""


def _select(name: str, label: str, value: str) -> str:
    opts = '<option value="">Choose a city</option>' + "".join(
        f'<option value="{c}"{" selected" if c == value else ""}>{esc(n)} ({c})</option>'
        for c, n in data.CITIES.items()
    )
    return (f'<span class="field"><label for="f-{name}">{label}</label>'
            f'<select id="f-{name}" name="{name}">{opts}</select></span>')


def _search_form(q: dict[str, str]) -> str:
    return (
        '<form method="get" action="/travel/search" aria-label="Search flights">'
        + _select("from", "From", q.get("from", ""))
        + _select("to", "To", q.get("to", ""))
        + text_field("date", "Departure date", q.get("date", ""), kind="date",
                     extra=f' min="{data.FIRST_DAY}" max="{data.LAST_DAY}"')
        + '<button type="button" id="cal-open">Open calendar</button>'
        '<div id="cal" hidden role="group" aria-label="Calendar">'
        '<button type="button" id="cal-prev">Previous month</button> <span id="cal-title"></span> '
        '<button type="button" id="cal-next">Next month</button><div id="cal-days"></div></div>'
        + text_field("passengers", "Passengers", q.get("passengers", "1"), kind="number",
                     extra=f' min="1" max="{data.MAX_PASSENGERS}"')
        + '<button type="submit">Search flights</button></form>'
    )


def _page(title: str, body: str) -> web.Response:
    return render(f"{title} | {BRAND}", body, brand=BRAND, nav=NAV, script=_CALENDAR_JS)


def _route_link(o: str, d: str) -> str:
    return link(url("/travel/", {"from": o, "to": d}),
                f"{data.CITIES[o]} to {data.CITIES[d]}")


async def home(request: web.Request) -> web.Response:
    pop = "".join(f"<li>{_route_link(o, d)}</li>" for o, d in data.POPULAR)
    body = (
        f"<h1>Find a flight</h1>{_search_form(dict(request.query))}"
        f"<p>Flights are on sale from {data.long_date(data.FIRST_DAY)} to "
        f"{data.long_date(data.LAST_DAY)}.</p>"
        f'<section aria-label="Popular routes"><h2>Popular routes</h2><ul>{pop}</ul></section>'
    )
    return _page("Find a flight", body)


async def routes_page(request: web.Request) -> web.Response:
    items = "".join(
        f"<li>{_route_link(o, d)}</li>" for o in data.CITIES for d in data.CITIES if o != d
    )
    return _page("All routes", f"<h1>All routes</h1><ul>{items}</ul>")


def _passengers(value: str) -> int | None:
    return int(value) if value.isdigit() and 1 <= int(value) <= data.MAX_PASSENGERS else None


def _problems(q: dict[str, str]) -> list[str]:
    out = []
    if q.get("from") not in data.CITIES:
        out.append("an origin (From)")
    if q.get("to") not in data.CITIES:
        out.append("a destination (To)")
    if data.parse_day(q.get("date", "")) is None:
        out.append(f"a departure date between {data.FIRST_DAY} and {data.LAST_DAY}")
    if _passengers(q.get("passengers", "")) is None:
        out.append(f"1 to {data.MAX_PASSENGERS} passengers")
    return out


async def search(request: web.Request) -> web.Response:
    q = dict(request.query)
    missing = _problems(q)
    if not missing and q["from"] == q["to"]:
        missing = ["a destination different from the origin"]
    if missing:
        body = ("<h1>Find a flight</h1>" + notice("Please choose " + "; ".join(missing) + ".")
                + _search_form(q))
        return _page("Find a flight", body)
    o, d, pax = q["from"], q["to"], int(q["passengers"])
    day = data.parse_day(q["date"])
    assert day is not None
    sort, nonstop = q.get("sort", ""), q.get("nonstop") == "1"
    flights = data.search(o, d, day, sort, nonstop)
    rows = []
    for f in flights:
        book = (f'<form class="inline" method="get" action="/travel/book">'
                f'<input type="hidden" name="flight" value="{f.number}">'
                f'<input type="hidden" name="date" value="{day}">'
                f'<input type="hidden" name="passengers" value="{pax}">'
                f'<button type="submit">Book {f.number}</button></form>')
        rows.append([esc(f.number), esc(f.airline), f.departs, f.arrives, f.duration,
                     f.stops_text, f"€{data.fare(f, day)}", f"€{data.fare(f, day) * pax}", book])
    keep = {k: q[k] for k in ("from", "to", "date", "passengers")}
    sorts = [("price", "Cheapest first"), ("", "Earliest departure"),
             ("duration", "Shortest flight")]
    sort_links = " | ".join(
        link(url("/travel/search", {**keep, "sort": k, "nonstop": "1" if nonstop else ""}), t)
        for k, t in sorts
    )
    toggle = link(url("/travel/search", {**keep, "sort": sort, "nonstop": "" if nonstop else "1"}),
                  "Show all flights" if nonstop else "Nonstop only")
    body = (
        f"<h1>Flights from {data.CITIES[o]} to {data.CITIES[d]}</h1>"
        f"<p>{data.long_date(day)} · {pax} passenger{'s' if pax > 1 else ''}</p>"
        f"<p>Sort: {sort_links}</p><p>Filter: {toggle}</p>"
        + table(["Flight", "Airline", "Departs", "Arrives", "Duration", "Stops",
                 "Fare per passenger", "Total", "Action"], rows, "Available flights")
        + "<h2>Change search</h2>" + _search_form(q)
    )
    return _page(f"{data.CITIES[o]} to {data.CITIES[d]}", body)


def _booking(q: dict[str, str]) -> tuple[data.Flight, date, int]:
    flight = data.BY_NUMBER.get(q.get("flight", ""))
    day = data.parse_day(q.get("date", ""))
    pax = _passengers(q.get("passengers", ""))
    if flight is None or day is None or pax is None:
        raise web.HTTPBadRequest(text="Unknown flight, date or passenger count.")
    return flight, day, pax


def _summary(f: data.Flight, day: date, pax: int, flex: bool) -> str:
    per = data.fare(f, day, flex)
    return table(["Detail", "Value"], [
        ["Flight", f"{esc(f.number)} ({esc(f.airline)})"],
        ["Route", f"{data.CITIES[f.origin]} to {data.CITIES[f.destination]}"],
        ["Date", data.long_date(day)], ["Departs", f.departs], ["Arrives", f.arrives],
        ["Passengers", str(pax)], ["Fare type", "Flex" if flex else "Basic"],
        ["Total price", f"€{per * pax}"],
    ], "Trip summary")


def _book_form(f: data.Flight, day: date, pax: int, flex: bool, name: str, email: str,
               msg: str) -> str:
    hidden = "".join(f'<input type="hidden" name="{k}" value="{esc(v)}">'
                     for k, v in (("flight", f.number), ("date", day), ("passengers", pax)))
    radios = "".join(
        f'<input type="radio" id="fare-{v}" name="fare" value="{v}"'
        f'{" checked" if (v == "flex") == flex else ""}><label for="fare-{v}">{t}</label>'
        for v, t in (("basic", "Basic fare"), ("flex", f"Flex fare (+€{data.FLEX_EXTRA} "
                                                      "per passenger)"))
    )
    return (
        f"<h1>Book flight {esc(f.number)}</h1>{msg}{_summary(f, day, pax, flex)}"
        '<form method="post" action="/travel/book" aria-label="Passenger details">'
        f"{hidden}<fieldset><legend>Fare type</legend>{radios}</fieldset>"
        + text_field("name", "Lead passenger name", name)
        + text_field("email", "Email", email)
        + '<button type="submit">Confirm booking</button></form>'
    )


async def book(request: web.Request) -> web.Response:
    if request.method == "GET":
        f, day, pax = _booking(dict(request.query))
        return _page(f"Book {f.number}", _book_form(f, day, pax, False, "", "", ""))
    form = {k: str(v) for k, v in (await request.post()).items()}
    f, day, pax = _booking(form)
    flex = form.get("fare") == "flex"
    name, email = form.get("name", "").strip(), form.get("email", "").strip()
    missing = [lbl for lbl, v in (("Lead passenger name", name), ("Email", email)) if not v]
    if missing:
        msg = notice("Please fill in: " + ", ".join(missing) + ".")
        return _page(f"Book {f.number}", _book_form(f, day, pax, flex, name, email, msg))
    code = data.confirmation_code(f, day, pax, flex)
    body = (
        "<h1>Booking confirmed</h1>"
        f"<p>Confirmation code: <strong>{code}</strong></p>"
        f"<p>Lead passenger: {esc(name)}. A receipt was sent to {esc(email)}.</p>"
        + _summary(f, day, pax, flex) + link("/travel/", "Book another flight")
    )
    return _page(f"Booking {code}", body)


def routes() -> list[web.RouteDef]:
    return [
        web.get("/travel/", home),
        web.get("/travel/routes", routes_page),
        web.get("/travel/search", search),
        web.get("/travel/book", book),
        web.post("/travel/book", book),
    ]
