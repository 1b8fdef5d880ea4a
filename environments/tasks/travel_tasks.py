"""Tasks for the sandbox travel site: timetable questions up to full bookings.

Routes are opened through their pre-filling links ("Lisbon to Berlin"), so no task needs a
select-option action; dates are typed into the date field as YYYY-MM-DD. Each task names its
template (its kind of question) and the route it searches, so build_tasks can decide its split.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from environments import travel_data as d
from environments.tasks.common import Action, answer, button, click, link, number, task, type_

FLEX_LABEL = f"Flex fare (+€{d.FLEX_EXTRA} per passenger)"


def _route(o: str, t: str) -> Action:
    return link(f"{d.CITIES[o]} to {d.CITIES[t]}")


def _open_route(o: str, t: str) -> list[Action]:
    """Popular routes are linked from the home page; the rest via "All routes"."""
    return [_route(o, t)] if (o, t) in d.POPULAR else [link("All routes"), _route(o, t)]


def _date(day: date) -> Action:
    return type_("textbox", "Departure date", day.isoformat())


def _search(o: str, t: str, day: date, pax: int = 1) -> list[Action]:
    steps = _open_route(o, t)
    if pax != 1:
        steps.append(number("Passengers", str(pax)))
    return [*steps, _date(day)]


def _details(name: str, email: str) -> list[Action]:
    return [type_("textbox", "Lead passenger name", name), type_("textbox", "Email", email)]


def _day(day: date) -> str:
    return f"{day.day} {day:%B %Y}"


def _t(n: int, instruction: str, sub: str, diff: int, facts: list[tuple[str, list[str]]],
       actions: list[Action], *, template: str, route: tuple[str, str]) -> dict[str, Any]:
    o, t = route
    assert _route(o, t) in actions, (n, "the route named is not the one searched")
    return task(f"travel-{n:03d}", instruction, site="travel", subdomain=sub, path="/travel/",
                difficulty=diff, facts=facts, actions=actions, template=template,
                entities=[f"route:{d.CITIES[o]} to {d.CITIES[t]}"])


def tasks() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    day = date(2026, 7, 14)
    f = d.search("LIS", "BER", day)[0]
    out.append(_t(1, f"On SandTrip, which flight is the earliest from Lisbon to Berlin on "
                  f"{_day(day)}? Give the flight number.", "timetable", 2,
                  [("Search", ["Flights from Lisbon to Berlin on 14 July 2026 are listed"]),
                   ("Earliest", [f"{f.number} departs first, at {f.departs}"])],
                  [*_search("LIS", "BER", day), answer(f.number)],
                  template="hand-travel-timetable", route=("LIS", "BER")))
    day = date(2026, 6, 10)
    f = d.search("MAD", "FCO", day, "price")[0]
    fare = f"€{d.fare(f, day)}"
    out.append(_t(2, f"What is the lowest fare per passenger from Madrid to Rome on "
                  f"{_day(day)}?", "fares", 3,
                  [("Cheapest", [f"{f.number} is the cheapest flight at {fare} per passenger"])],
                  [*_search("MAD", "FCO", day), link("Cheapest first"), answer(fare)],
                  template="hand-travel-fare", route=("MAD", "FCO")))
    day = date(2026, 8, 3)
    f = d.search("BER", "OSL", day, "duration")[0]
    out.append(_t(3, f"How long is the shortest flight from Berlin to Oslo on {_day(day)}?",
                  "timetable", 3,
                  [("Shortest", [f"{f.number} takes {f.duration}"])],
                  [*_search("BER", "OSL", day), link("Shortest flight"), answer(f.duration)],
                  template="hand-travel-timetable", route=("BER", "OSL")))
    day = date(2026, 7, 1)
    f = d.search("VIE", "LIS", day)[0]
    out.append(_t(4, f"Which airline operates the earliest flight from Vienna to Lisbon on "
                  f"{_day(day)}?", "timetable", 2,
                  [("Earliest", [f"The earliest flight is {f.number}, operated by {f.airline}"])],
                  [*_search("VIE", "LIS", day), answer(f.airline)],
                  template="hand-travel-timetable", route=("VIE", "LIS")))
    day = date(2026, 7, 3)
    f = d.search("OSL", "MAD", day, "price")[0]
    total = f"€{d.fare(f, day) * 3}"
    out.append(_t(5, f"What is the total price for 3 passengers on the cheapest flight from "
                  f"Oslo to Madrid on {_day(day)}?", "fares", 4,
                  [("Search", ["The search is for 3 passengers"]),
                   ("Total", [f"The cheapest flight {f.number} costs {total} in total"])],
                  [*_search("OSL", "MAD", day, 3), link("Cheapest first"), answer(total)],
                  template="hand-travel-fare", route=("OSL", "MAD")))
    day = date(2026, 6, 24)
    f = d.search("FCO", "OSL", day, "price", nonstop=True)[0]
    out.append(_t(6, f"Which nonstop flight from Rome to Oslo is cheapest on {_day(day)}? "
                  "Give the flight number.", "fares", 5,
                  [("Filter", ["Only nonstop flights are shown"]),
                   ("Cheapest", [f"{f.number} is the cheapest nonstop flight"])],
                  [*_search("FCO", "OSL", day), link("Nonstop only"), link("Cheapest first"),
                   answer(f.number)],
                  template="hand-travel-fare", route=("FCO", "OSL")))
    day = date(2026, 8, 20)
    f = d.search("MAD", "VIE", day, "duration")[0]
    out.append(_t(7, f"At what time does the shortest flight from Madrid to Vienna on "
                  f"{_day(day)} arrive?", "timetable", 5,
                  [("Shortest", [f"{f.number} is the shortest flight, {f.duration}"]),
                   ("Arrival", [f"{f.number} arrives at {f.arrives}"])],
                  [*_search("MAD", "VIE", day), link("Shortest flight"), answer(f.arrives)],
                  template="hand-travel-timetable", route=("MAD", "VIE")))
    day = date(2026, 6, 16)
    f = d.search("LIS", "BER", day)[0]
    code = d.confirmation_code(f, day, 1, False)
    out.append(_t(8, f"Book the earliest flight from Lisbon to Berlin on {_day(day)} for "
                  "1 passenger (Basic fare) in the name of 'Marie Curie', email "
                  "'marie@example.org'. What is the confirmation code?", "booking", 6,
                  [("Flight", [f"Flight {f.number} on 16 June 2026 is booked for 1 passenger"]),
                   ("Confirmation", [f"The confirmation code is {code}"])],
                  [*_search("LIS", "BER", day), button(f"Book {f.number}"),
                   *_details("Marie Curie", "marie@example.org"), answer(code)],
                  template="hand-travel-booking", route=("LIS", "BER")))
    fri, tue = date(2026, 7, 10), date(2026, 7, 14)
    fares = {x: d.fare(d.search("BER", "OSL", x, "price")[0], x) for x in (fri, tue)}
    cheap_day = min(fares, key=fares.__getitem__)
    other = fri if cheap_day == tue else tue
    out.append(_t(9, "Compare the cheapest Berlin to Oslo fares on Friday 10 July 2026 and "
                  "Tuesday 14 July 2026. What is the lower of the two fares per passenger?",
                  "fares", 6,
                  [("Both days", [f"The cheapest fare on {other.day} {other:%B} is €{fares[other]}",
                                  f"The cheapest fare on {cheap_day.day} {cheap_day:%B} is "
                                  f"€{fares[cheap_day]}"])],
                  [*_search("BER", "OSL", other), link("Cheapest first"), _date(cheap_day),
                   link("Cheapest first"), answer(f"€{fares[cheap_day]}")],
                  template="hand-travel-compare-days", route=("BER", "OSL")))
    day = date(2026, 7, 3)
    f = d.search("OSL", "MAD", day, "price")[0]
    code = d.confirmation_code(f, day, 3, True)
    out.append(_t(10, f"Book the cheapest flight from Oslo to Madrid on {_day(day)} for 3 "
                  "passengers with the Flex fare. Lead passenger 'Nils Holm', email "
                  "'nils@example.org'. What is the confirmation code?", "booking", 7,
                  [("Booking", [f"{f.number} is booked for 3 passengers with the Flex fare"]),
                   ("Confirmation", [f"The confirmation code is {code}"])],
                  [*_search("OSL", "MAD", day, 3), link("Cheapest first"),
                   button(f"Book {f.number}"), click("radio", FLEX_LABEL),
                   *_details("Nils Holm", "nils@example.org"), answer(code)],
                  template="hand-travel-booking", route=("OSL", "MAD")))
    day = date(2026, 8, 7)
    f = d.search("VIE", "MAD", day, "price", nonstop=True)[0]
    code = d.confirmation_code(f, day, 2, False)
    out.append(_t(11, f"Book the cheapest nonstop flight from Vienna to Madrid on "
                  f"{_day(day)} for 2 passengers (Basic fare). Lead passenger 'Ada Byron', "
                  "email 'ada@example.org'. What is the confirmation code?", "booking", 8,
                  [("Flight", [f"{f.number} is the cheapest nonstop flight that day"]),
                   ("Confirmation", [f"The confirmation code is {code}"])],
                  [*_search("VIE", "MAD", day, 2), link("Nonstop only"), link("Cheapest first"),
                   button(f"Book {f.number}"), *_details("Ada Byron", "ada@example.org"),
                   answer(code)],
                  template="hand-travel-booking", route=("VIE", "MAD")))
    day = date(2026, 6, 21)
    f = d.search("BER", "OSL", day)[0]
    total = f"€{d.fare(f, day) * 2}"
    out.append(_t(12, "Using the calendar picker (not typing the date), search Berlin to Oslo "
                  "flights on 21 June 2026 for 2 passengers. What is the total price of the "
                  "earliest flight?", "calendar", 7,
                  [("Search", ["Berlin to Oslo flights on Sunday, 21 June 2026 for 2 passengers "
                               "are listed"]),
                   ("Total", [f"The earliest flight {f.number} costs {total} in total"])],
                  [*_open_route("BER", "OSL"), number("Passengers", "2"),
                   button("Open calendar"), button("21 June 2026"), button("Search flights"),
                   answer(total)],
                  template="hand-travel-calendar", route=("BER", "OSL")))
    day = date(2026, 8, 28)
    f = d.search("FCO", "LIS", day, "duration")[0]
    code = d.confirmation_code(f, day, 4, True)
    out.append(_t(13, f"Book the shortest flight from Rome to Lisbon on {_day(day)} for 4 "
                  "passengers with the Flex fare. Lead passenger 'Enzo Ricci', email "
                  "'enzo@example.org'. What is the confirmation code?", "booking", 9,
                  [("Flight", [f"{f.number} is the shortest flight that day"]),
                   ("Confirmation", [f"The confirmation code is {code}"])],
                  [*_search("FCO", "LIS", day, 4), link("Shortest flight"),
                   button(f"Book {f.number}"), click("radio", FLEX_LABEL),
                   *_details("Enzo Ricci", "enzo@example.org"), answer(code)],
                  template="hand-travel-booking", route=("FCO", "LIS")))
    day = date(2026, 7, 17)
    f = d.search("LIS", "BER", day, "price")[0]
    total = f"€{d.fare(f, day, flex=True) * 2}"
    out.append(_t(14, f"For 2 passengers on the cheapest Lisbon to Berlin flight on "
                  f"{_day(day)}, what would the total price be with the Flex fare? (Start "
                  "the booking with lead passenger 'Ines Sousa' to see the price, but do not "
                  "confirm.)", "fares", 7,
                  [("Flight", [f"{f.number} is the cheapest flight that day"]),
                   ("Flex total", [f"With the Flex fare the total is {total}"])],
                  [*_search("LIS", "BER", day, 2), link("Cheapest first"),
                   button(f"Book {f.number}"), click("radio", FLEX_LABEL),
                   type_("textbox", "Lead passenger name", "Ines Sousa"), answer(total)],
                  template="hand-travel-fare", route=("LIS", "BER")))
    return out
