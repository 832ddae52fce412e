"""A small town's site for ``concierge bench conversation``: its articles, one visitor's eight
questions (each a follow-up of the last) and other visitors' questions to run in between.

The articles are long enough that each question retrieves several passages, as on a real
site: a turn's prompt then holds articles, not only the conversation.
"""

from __future__ import annotations

from engine.knowledge.models import Article

BASE = "https://town.example"


def _article(path: str, title: str, *paragraphs: str) -> Article:
    return Article(f"{BASE}{path}", title, "\n".join(paragraphs))


ARTICLES = [
    _article(
        "/ferry",
        "Ferry to Nishi Island",
        "The ferry to Nishi Island leaves the east harbour at 7:30, 9:00, 12:00, 14:30 and "
        "16:00 every day of the year, weather permitting. The crossing takes forty minutes.",
        "The last ferry back from Nishi Island leaves the island pier at 17:45 from April to "
        "October and at 16:45 from November to March. Missing it means a night on the island: "
        "the island inn keeps two rooms free for stranded visitors.",
        "A return ticket costs 1,200 yen for adults and 600 yen for children under twelve. A "
        "single ticket costs 700 yen. Tickets are sold at the harbour office, which opens thirty "
        "minutes before the first departure, and on board when the office is closed.",
        "Bicycles travel on the ferry for 300 yen each way; there is room for twelve on every "
        "crossing, first come, first served. Dogs on a lead travel free. Cars cannot be taken.",
        "In a storm warning the ferry does not run; the harbour office posts cancellations on "
        "its door and on the town's website by 6:30 in the morning.",
    ),
    _article(
        "/nishi-island",
        "What to see on Nishi Island",
        "Nishi Island is a quiet island of fishermen and orange groves, an hour's walk from end "
        "to end. A marked path leads from the pier past the old salt works to the lighthouse.",
        "The lighthouse, built in 1887, is open to visitors from 10:00 to 16:00 every day except "
        "Tuesdays. Entry costs 300 yen; the climb of 112 steps ends on a gallery with a view of "
        "the whole bay. Children under six may not climb.",
        "The salt works show how sea salt was made on the island for three hundred years; "
        "demonstrations run on weekends at 11:00 and 14:00. The orange groves sell fruit and "
        "juice at the roadside from November to February.",
        "The island has one public toilet, at the pier, and no shop: bring water in summer.",
    ),
    _article(
        "/lighthouse-cafe",
        "The Lighthouse Café",
        "The Lighthouse Café sits at the foot of the lighthouse on Nishi Island. It serves "
        "grilled fish, rice bowls, orange cake and coffee from 11:00 to 15:30, closed Tuesdays "
        "like the lighthouse.",
        "The café takes cash and cards (Visa, Mastercard and JCB) and the town's transport "
        "card; it does not take cheques. A lunch set costs about 1,100 yen.",
        "Tables on the terrace cannot be booked; groups of more than eight should call the "
        "café the day before so it can prepare enough fish.",
    ),
    _article(
        "/museum",
        "Town Museum: hours and tickets",
        "The town museum on Castle Street is open from 9:30 to 17:00, closed on Mondays and "
        "over the New Year. Last entry is at 16:30.",
        "Museum tickets: adults 800 yen, students 400 yen, children free. A ticket is valid "
        "all day, so visitors may leave for lunch and come back.",
        "The museum shows the town's fishing history, a collection of ship models and a room "
        "of woodblock prints of the bay, changed every season.",
    ),
    _article(
        "/parking",
        "Parking near the station",
        "The station car park has 120 spaces and costs 200 yen an hour, 1,000 yen for the "
        "whole day. It is open around the clock; pay at the machine by the exit.",
        "On festival days the car park fills by 9:00. The school grounds on Hill Road then "
        "open as an overflow car park, free of charge, with a shuttle bus to the station.",
    ),
    _article(
        "/library",
        "The town library",
        "The library lends up to ten books for two weeks to anyone living or working in the "
        "town. A loan can be renewed twice online, unless someone else has reserved the book.",
        "It is open from 10:00 to 19:00 on weekdays and from 10:00 to 17:00 at weekends. "
        "Visitors from elsewhere may read and use the wifi without a card.",
    ),
]

# Each a follow-up of the one before. Each names what it asks about: the site's relevance
# decision reads the question alone (an elliptical "Do they take cards?" is "not on the site").
CONVERSATION = (
    "When does the ferry to Nishi Island leave?",
    "How much is a return ticket?",
    "Can I take my bicycle on it?",
    "What is there to see on the island?",
    "When is the lighthouse open?",
    "Is there a café near the lighthouse?",
    "Does the café take cards?",
    "And when is the last ferry back?",
)

# What a good assistant answers to each, written, as long as a real answer (SmolLM2-135M's own
# shrink to "The answer is no." after a few turns): the history of tests/test_history_blocks.py.
# ``bench conversation`` gives back the model's own answers, as a bot does.
ANSWERS = (
    "The ferry to Nishi Island leaves the east harbour at 7:30, 9:00, 12:00, 14:30 and 16:00 "
    "every day of the year, weather permitting. The crossing takes forty minutes, so the "
    "9:00 ferry arrives at about 9:40.",
    "A return ticket costs 1,200 yen for adults and 600 yen for children under twelve. A "
    "single ticket is 700 yen. You can buy it at the harbour office, which opens thirty "
    "minutes before the first departure, or on board when the office is closed.",
    "Yes. Bicycles travel on the ferry for 300 yen each way. There is room for twelve "
    "bicycles on every crossing, first come, first served, so arrive early in summer. Cars "
    "cannot be taken, but dogs on a lead travel free.",
    "Nishi Island is quiet: fishermen, orange groves and an hour's walk from end to end. A "
    "marked path leads from the pier past the old salt works, where demonstrations run on "
    "weekends at 11:00 and 14:00, to the lighthouse built in 1887.",
    "The lighthouse is open from 10:00 to 16:00 every day except Tuesdays. Entry costs 300 "
    "yen, and the climb of 112 steps ends on a gallery with a view of the whole bay. "
    "Children under six may not climb.",
    "Yes, the Lighthouse Café sits at the foot of the lighthouse. It serves grilled fish, "
    "rice bowls, orange cake and coffee from 11:00 to 15:30, and it is closed on Tuesdays, "
    "like the lighthouse. A lunch set costs about 1,100 yen.",
    "Yes. The café takes cash and cards (Visa, Mastercard and JCB) and the town's transport "
    "card, but not cheques. Tables on the terrace cannot be booked; groups of more than "
    "eight should call the day before.",
    "The last ferry back leaves the island pier at 17:45 from April to October and at 16:45 "
    "from November to March. If you miss it, the island inn keeps two rooms free for "
    "stranded visitors.",
)

OTHER_QUESTIONS = (  # other visitors', asked between the turns
    "What are the museum's opening hours?",
    "How much does parking at the station cost?",
    "How many books does the library lend?",
    "Is the museum ticket valid all day?",
    "Where do cars park on festival days?",
    "When is the library open at weekends?",
)
