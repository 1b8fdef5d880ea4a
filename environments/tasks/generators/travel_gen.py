"""Generated SandTrip tasks over all 30 routes: timetables, fares, nonstop filters, bookings
with dates and fares, and day-to-day fare comparisons. Dates are spread over the sale
period by a fixed formula; routes open through their pre-filling links. Each look-up and
booking asks one date a route; `POOL_DAYS` more dates a route are drafted pool-only: further
tasks over the rollout pool's routes (splits)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

from environments import travel_data as d
from environments.tasks.common import Action, answer, button, click, link, number, type_
from environments.tasks.generators.draft import Draft, pool_only

ROUTES = [(o, t) for o in d.CITIES for t in d.CITIES if o != t]
FLEX_LABEL = f"Flex fare (+€{d.FLEX_EXTRA} per passenger)"
TRAVELLERS = [("Marie Curie", "marie@example.org"), ("Nils Holm", "nils@example.org"),
              ("Ada Byron", "ada@example.org"), ("Enzo Ricci", "enzo@example.org"),
              ("Ines Sousa", "ines@example.org")]
_SPAN = (d.LAST_DAY - d.FIRST_DAY).days + 1
# The day indices (`_day`) of the pool-only drafts; 0-9 are the templates' own.
POOL_DAYS = range(10, 14)


def _name(o: str, t: str) -> str:
    return f"{d.CITIES[o]} to {d.CITIES[t]}"


def _e(o: str, t: str) -> list[str]:
    return [f"route:{_name(o, t)}"]


def _day(route: int, k: int) -> date:
    """The k-th date used for a route: co-prime strides, so routes get different days (and a
    route a different day for each k below the sale period's length)."""
    return d.FIRST_DAY + timedelta(days=(route * 11 + k * 29 + 3) % _SPAN)


def _text(day: date) -> str:
    return f"{day.day} {day:%B %Y}"


def _search(o: str, t: str, day: date, pax: int = 1) -> list[Action]:
    """Popular routes are linked from the home page, the rest from "All routes"."""
    steps = [link(_name(o, t))] if (o, t) in d.POPULAR else [link("All routes"), link(_name(o, t))]
    if pax != 1:
        steps.append(number("Passengers", str(pax)))
    return [*steps, type_("textbox", "Departure date", day.isoformat())]


def _earliest(o: str, t: str, day: date) -> d.Flight | None:
    """The first departure, or None when two flights leave at the same minute."""
    flights = d.search(o, t, day)
    if len(flights) > 1 and flights[0].departs == flights[1].departs:
        return None
    return flights[0]


def _per_day(k: int, draft: Callable[[int, str, str, date], Draft | None]) -> list[Draft]:
    """`draft` on every route at its k-th day, then on every route at each of the POOL_DAYS
    (pool-only); None drafts nothing."""
    own = [x for i, (o, t) in enumerate(ROUTES) if (x := draft(i, o, t, _day(i, k)))]
    more = [x for i, (o, t) in enumerate(ROUTES) for j in POOL_DAYS
            if (x := draft(i + j, o, t, _day(i, j)))]
    return own + pool_only(more)


def _earliest_flight(_: int, o: str, t: str, day: date) -> Draft | None:
    f = _earliest(o, t, day)
    if f is None:
        return None
    return Draft("travel-earliest", f"On SandTrip, which flight departs earliest from "
                 f"{_name(o, t)} on {_text(day)}? Give the flight number.", "travel",
                 "timetable", 2,
                 [("Earliest", [f"{f.number} departs first that day, at {f.departs}"])],
                 [*_search(o, t, day), answer(f.number)], _e(o, t))


def earliest() -> list[Draft]:
    return _per_day(0, _earliest_flight)


def _cheapest_fare(_: int, o: str, t: str, day: date) -> Draft:
    f = d.search(o, t, day, "price")[0]
    fare = f"€{d.fare(f, day)}"
    return Draft("travel-cheapest-fare", f"What is the lowest fare per passenger from "
                 f"{_name(o, t)} on {_text(day)} on SandTrip?", "travel", "fares", 3,
                 [("Cheapest", [f"{f.number} is the cheapest flight at {fare} per passenger"])],
                 [*_search(o, t, day), link("Cheapest first"), answer(fare)], _e(o, t))


def cheapest_fare() -> list[Draft]:
    return _per_day(1, _cheapest_fare)


def _nonstop_cheapest(_: int, o: str, t: str, day: date) -> Draft | None:
    flights = d.search(o, t, day, "price", nonstop=True)
    if len(flights) < 2 or len(flights) == len(d.search(o, t, day)):
        return None  # the filter must matter and leave a choice
    f = flights[0]
    return Draft("travel-nonstop-cheapest", f"On SandTrip, which nonstop flight from "
                 f"{_name(o, t)} is the cheapest on {_text(day)}? Give the flight "
                 "number.", "travel", "fares", 4,
                 [("Filter", ["Only nonstop flights are shown"]),
                  ("Cheapest", [f"{f.number} is the cheapest nonstop flight at "
                                f"€{d.fare(f, day)}"])],
                 [*_search(o, t, day), link("Nonstop only"), link("Cheapest first"),
                  answer(f.number)], _e(o, t))


def nonstop_cheapest() -> list[Draft]:
    return _per_day(2, _nonstop_cheapest)


def compare_days() -> list[Draft]:
    """Three date pairs per route (splits keeps the held-out routes)."""
    out: list[Draft] = []
    for i, (o, t) in enumerate(ROUTES):
        for k in range(3):
            a, b = _day(i, 3 + 2 * k), _day(i, 4 + 2 * k)
            fares = {x: d.fare(d.search(o, t, x, "price")[0], x) for x in (a, b)}
            if fares[a] == fares[b] or a == b:
                continue
            low, high = sorted((a, b), key=fares.__getitem__)
            out.append(Draft("travel-compare-days", f"On SandTrip, compare the cheapest "
                             f"{_name(o, t)} fares on {_text(a)} and {_text(b)}. What is the "
                             "lower of the two fares per passenger?", "travel", "comparison", 7,
                             [("Both days", [f"The cheapest fare on {_text(x)} is €{fares[x]}"
                                             for x in (a, b)]),
                              ("Lower", [f"The lower fare is €{fares[low]}, on {_text(low)}"])],
                             [*_search(o, t, high), link("Cheapest first"),
                              type_("textbox", "Departure date", low.isoformat()),
                              link("Cheapest first"), answer(f"€{fares[low]}")], _e(o, t)))
    return out


def _booking(i: int, o: str, t: str, day: date) -> Draft:
    pax, flex = 1 + i % 4, i % 3 == 0
    first = None if i % 2 == 0 else _earliest(o, t, day)
    by_price = first is None
    f = d.search(o, t, day, "price")[0] if first is None else first
    who, email = TRAVELLERS[i % len(TRAVELLERS)]
    code = d.confirmation_code(f, day, pax, flex)
    kind, fare = ("cheapest" if by_price else "earliest"), ("Flex" if flex else "Basic")
    steps = [*_search(o, t, day, pax)] + ([link("Cheapest first")] if by_price else [])
    steps += [button(f"Book {f.number}")] + ([click("radio", FLEX_LABEL)] if flex else [])
    steps += [type_("textbox", "Lead passenger name", who), type_("textbox", "Email", email)]
    return Draft("travel-booking", f"On SandTrip, book the {kind} flight from "
                 f"{_name(o, t)} on {_text(day)} for {pax} passenger"
                 f"{'s' if pax > 1 else ''} with the {fare} fare. Lead passenger "
                 f"'{who}', email '{email}'. What is the confirmation code?", "travel",
                 "booking", 8,
                 [("Flight", [f"{f.number} is the {kind} flight that day"]),
                  ("Booking", [f"{f.number} on {_text(day)} is booked for {pax} "
                               f"passenger{'s' if pax > 1 else ''} with the {fare} fare"]),
                  ("Confirmation", [f"The confirmation code is {code}"])],
                 [*steps, answer(code)], _e(o, t))


def booking() -> list[Draft]:
    """Cheapest or earliest flight, 1-4 passengers, Basic or Flex, by a fixed rotation (the
    route's index; a pool-only draft's index plus its day index)."""
    return _per_day(9, _booking)


TEMPLATES = [earliest, cheapest_fare, nonstop_cheapest, compare_days, booking]
