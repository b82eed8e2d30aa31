"""How well the no-model detail check recognises what a lossy memory leaves out.

``python -m benchmarks.details_shapes [--verbose]``

Not part of ``benchmarks.run`` (nothing is timed): a hand-written corpus of chat turns in
which a user states one detail (support tickets, travel, coding, family logistics,
shopping, medical appointments…), written apart from the evaluation generator
(``stm_memory/evaluation/_generator.py``) so it does not share its sentences or
vocabulary. Each turn comes with two memories: one that carries the detail in another
form the check normalises (case, accents, curly quotes, thousands separators, an hour's
leading zero, ``9.35pm`` as ``9:35 pm``, an amount without its currency; a date kept as
written), and one that leaves it out. Per shape of :mod:`stm_memory.model.details`:

- *caught when missing*: the detail is found by ``details()`` and ``missing()`` reports
  it against the memory that leaves it out;
- *flagged though carried*: ``missing()`` still reports it against the memory that
  carries it (an excerpt kept for nothing: a few tokens);
- *not recognised*: ``details()`` finds nothing where the detail is (it is lost if the
  memory leaves it out).

A detail counts as found when a detail ``details()`` returns overlaps where it is said
(a date ``5/12`` read as a path still counts). Separately, the limits the module
documents (paraphrases, a name that is a common word, lower-case names and values with
no cue word, facts with no detail shape) are checked to behave as documented, and the
share of ~40 chit-chat turns that yield any detail at all is the over-flagging floor.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from stm_memory.model.details import Detail, DetailShape, details, missing, normalize

__all__ = ["CASES", "CHITCHAT", "LIMITS", "Case", "Limit", "main", "measure", "table"]


@dataclass(frozen=True, slots=True)
class Case:
    """A user's turn stating ``detail`` (verbatim in ``said``), a memory that carries it
    in another normal form and one that leaves it out."""

    shape: DetailShape
    said: str
    detail: str
    carried: str
    omitted: str


LimitKind = Literal["paraphrase", "common-word name", "lower case, no cue", "no shape"]


@dataclass(frozen=True, slots=True)
class Limit:
    """A documented limit. ``paraphrase``: ``memory`` carries the detail in words the check
    does not equate, so it is expected to be flagged anyway (over-flagging). The other
    kinds: the detail is expected not to be recognised at all (``memory`` leaves it
    out), a miss."""

    shape: DetailShape | Literal["none"]
    kind: LimitKind
    said: str
    detail: str
    memory: str


def _c(shape: DetailShape, rows: Sequence[tuple[str, str, str, str]]) -> list[Case]:
    return [Case(shape, *row) for row in rows]


# -- the corpus: (said, detail as said, memory carrying it, memory leaving it out) ------

CASES: tuple[Case, ...] = (
    *_c(
        "email",
        [
            (
                "You can send the invoice to Priya.Nair@Contoso.co.uk, she handles billing.",
                "Priya.Nair@Contoso.co.uk",
                "Invoices go to priya.nair@contoso.co.uk (billing).",
                "Invoices go to Priya in billing.",
            ),
            (
                "my work email changed, it's now j.okafor@northwind-health.org",
                "j.okafor@northwind-health.org",
                "User's new work email: J.Okafor@Northwind-Health.org.",
                "User's work email changed recently.",
            ),
            (
                "Please cc ops+alerts@fleetline.io on every outage ticket.",
                "ops+alerts@fleetline.io",
                "CC OPS+ALERTS@FLEETLINE.IO on outage tickets.",
                "CC the ops alerts list on outage tickets.",
            ),
            (
                "The landlord's address is marta_ruiz77@gmail.com if you need to email her"
                " about the deposit.",
                "marta_ruiz77@gmail.com",
                "Landlord Marta: Marta_Ruiz77@Gmail.com (deposit questions).",
                "Landlord Marta can be emailed about the deposit.",
            ),
            (
                "For the school trip forms, reply to trips@stmarys-primary.sch.uk by Friday.",
                "trips@stmarys-primary.sch.uk",
                "School trip forms to Trips@StMarys-Primary.sch.uk, due Friday.",
                "School trip forms due Friday; reply to the school office.",
            ),
            (
                "Our recruiter is Hannah, h.bergstrom@talentbridge.se",
                "h.bergstrom@talentbridge.se",
                "Recruiter Hannah, H.Bergstrom@TalentBridge.se.",
                "Recruiter is Hannah from TalentBridge.",
            ),
            (
                "Bug reports should go to bugs@kestrel-app.dev rather than my personal inbox.",
                "bugs@kestrel-app.dev",
                "Send bug reports to <Bugs@Kestrel-App.dev>, not the personal inbox.",
                "Bug reports go to the team address, not the personal inbox.",
            ),
            (
                "The pharmacy said to email refills@greenleafpharmacy.com with the"
                " prescription number.",
                "refills@greenleafpharmacy.com",
                "Refills: email Refills@GreenleafPharmacy.com with the Rx number.",
                "Refills are requested by email with the prescription number.",
            ),
            (
                "I registered with noor.haddad@outlook.fr, not my gmail.",
                "noor.haddad@outlook.fr",
                "Account email is Noor.Haddad@Outlook.fr (not gmail).",
                "Account uses an Outlook address, not gmail.",
            ),
            (
                "support told me to write to escalations@parcelpoint.co.nz if it's not"
                " delivered by monday",
                "escalations@parcelpoint.co.nz",
                "If not delivered by Monday: Escalations@ParcelPoint.co.nz.",
                "If not delivered by Monday, escalate to support.",
            ),
            (
                "Send the signed lease to leasing@harborview-apts.com and keep a copy.",
                "leasing@harborview-apts.com",
                "Signed lease to LEASING@HARBORVIEW-APTS.COM; keep a copy.",
                "Signed lease must be emailed to leasing; keep a copy.",
            ),
            (
                "the conference badge was issued to d.fischer@uni-bonn.de so that's the login",
                "d.fischer@uni-bonn.de",
                "Conference login: D.Fischer@Uni-Bonn.de.",
                "Conference login is the university address.",
            ),
            (
                "Can you remind me that the vet's email is frontdesk@pawsandclaws.vet",
                "frontdesk@pawsandclaws.vet",
                "Vet email: FrontDesk@PawsAndClaws.vet",
                "User wants a reminder of the vet's email.",
            ),
        ],
    ),
    *_c(
        "url",
        [
            (
                "The status page is https://status.fleetline.io, check it before paging anyone.",
                "https://status.fleetline.io",
                "Status page https://Status.Fleetline.io; check before paging.",
                "Check the status page before paging anyone.",
            ),
            (
                "Here's the flat we liked: https://www.airbnb.com/rooms/48213377",
                "https://www.airbnb.com/rooms/48213377",
                "Liked flat: HTTPS://WWW.AIRBNB.COM/rooms/48213377",
                "User shared a flat they liked.",
            ),
            (
                "The design doc is at https://docs.google.com/document/d/1xT9qLmZ/edit",
                "https://docs.google.com/document/d/1xT9qLmZ/edit",
                "Design doc: https://docs.google.com/document/d/1xT9qLmZ/edit.",
                "The design doc link was shared.",
            ),
            (
                "grab the installer from www.python.org/downloads/release/python-3124 not the"
                " store version",
                "www.python.org/downloads/release/python-3124",
                "Installer: WWW.Python.org/downloads/release/python-3124, not the store.",
                "Installer from the python site, not the store.",
            ),
            (
                "Tickets for the museum are cheaper on https://tickets.rijksmuseum.nl/en if"
                " you book online",
                "https://tickets.rijksmuseum.nl/en",
                "Museum tickets cheaper online at https://Tickets.Rijksmuseum.nl/en.",
                "Museum tickets are cheaper online.",
            ),
            (
                "The failing build is https://ci.kestrel-app.dev/builds/7781",
                "https://ci.kestrel-app.dev/builds/7781",
                "Failing build: https://CI.Kestrel-App.dev/builds/7781",
                "A CI build is failing.",
            ),
            (
                "Mum wants the recipe, it's www.bbcgoodfood.com/recipes/lemon-drizzle-cake",
                "www.bbcgoodfood.com/recipes/lemon-drizzle-cake",
                "Recipe for Mum: www.BBCGoodFood.com/recipes/lemon-drizzle-cake",
                "Mum wants the lemon drizzle recipe.",
            ),
            (
                "The clinic's booking form is at https://book.northwind-health.org/physio?site=4",
                "https://book.northwind-health.org/physio?site=4",
                "Physio booking form: https://Book.Northwind-Health.org/physio?site=4",
                "Physio is booked through the clinic's online form.",
            ),
            (
                "I opened an issue: https://github.com/tidewater/pyparse/issues/312",
                "https://github.com/tidewater/pyparse/issues/312",
                "Issue opened at https://GitHub.com/tidewater/pyparse/issues/312.",
                "User opened an issue on the pyparse repo.",
            ),
            (
                "the return label can be printed from https://returns.parcelpoint.co.nz/label",
                "https://returns.parcelpoint.co.nz/label",
                "Return label: https://Returns.ParcelPoint.co.nz/label",
                "The return label can be printed online.",
            ),
            (
                "The hotel's shuttle timetable is on www.hotelsolmar.pt/shuttle (in Portuguese)",
                "www.hotelsolmar.pt/shuttle",
                "Shuttle timetable www.HotelSolmar.pt/shuttle, Portuguese only.",
                "Shuttle timetable is on the hotel website, in Portuguese.",
            ),
            (
                "Use the staging API at https://api-staging.ledgerly.com/v2 for the demo",
                "https://api-staging.ledgerly.com/v2",
                "Demo uses the staging API https://API-Staging.Ledgerly.com/v2.",
                "The demo runs against the staging API.",
            ),
            (
                "The school newsletter link is http://stmarys-primary.sch.uk/news/autumn",
                "http://stmarys-primary.sch.uk/news/autumn",
                "School newsletter: http://StMarys-Primary.sch.uk/news/autumn",
                "The autumn school newsletter is online.",
            ),
        ],
    ),
    *_c(
        "path",
        [
            (
                "The config lives in /etc/nginx/sites-available/ledgerly.conf on the prod box.",
                "/etc/nginx/sites-available/ledgerly.conf",
                "Prod nginx config: /etc/nginx/sites-available/ledgerly.conf.",
                "The nginx config is on the prod box.",
            ),
            (
                "The crash is somewhere in src/parser/tokenize.py, I think around the regex.",
                "src/parser/tokenize.py",
                "Crash likely in src/parser/tokenize.py (regex).",
                "Crash is in the tokenizer, probably the regex.",
            ),
            (
                "I saved the scans to C:\\Users\\Ines\\Documents\\Taxes2025 last night",
                "C:\\Users\\Ines\\Documents\\Taxes2025",
                "Tax scans saved in c:\\users\\ines\\documents\\taxes2025.",
                "Tax scans were saved in Documents.",
            ),
            (
                "Put the API key in ~/.config/ledgerly/credentials and chmod it 600",
                "~/.config/ledgerly/credentials",
                "API key goes in ~/.config/ledgerly/credentials, chmod 600.",
                "API key goes in the user's config directory, chmod 600.",
            ),
            (
                "The boarding passes are in Downloads/trip/boarding_passes.pdf.",
                "Downloads/trip/boarding_passes.pdf",
                "Boarding passes saved as downloads/trip/boarding_passes.pdf, per the user.",
                "Boarding passes are in the Downloads folder.",
            ),
            (
                "the migration that broke things is db/migrations/0042_add_invoice_index.sql",
                "db/migrations/0042_add_invoice_index.sql",
                "Breaking migration: db/migrations/0042_add_invoice_index.sql",
                "A database migration broke things.",
            ),
            (
                "Logs are rotated into /var/log/kestrel/ every night",
                "/var/log/kestrel",
                "Nightly log rotation into /var/log/kestrel.",
                "Logs rotate nightly.",
            ),
            (
                "My thesis draft is thesis_v7_final.docx, please don't confuse it with v6.",
                "thesis_v7_final.docx",
                "Current thesis draft: Thesis_v7_final.docx (not v6).",
                "The current thesis draft is the seventh version.",
            ),
            (
                "Edit package.json and bump the version before tagging.",
                "package.json",
                "Bump the version in Package.json before tagging.",
                "Bump the version before tagging.",
            ),
            (
                "The kids' vaccination records are in Family/Health/vaccines-2024.pdf on the"
                " shared drive",
                "Family/Health/vaccines-2024.pdf",
                "Vaccination records: family/health/vaccines-2024.pdf (shared drive).",
                "Vaccination records are on the shared drive.",
            ),
            (
                "tests fail only when I run tests/integration/test_refunds.py alone",
                "tests/integration/test_refunds.py",
                "Fails when run alone: tests/integration/test_refunds.py.",
                "An integration test fails when run alone.",
            ),
            (
                "The router backup is at D:\\Backups\\router-2025-03.cfg.",
                "D:\\Backups\\router-2025-03.cfg",
                "Router backup in d:\\backups\\router-2025-03.cfg (D drive)",
                "The router backup is on the D drive.",
            ),
            (
                "the photo for the passport renewal is IMG_4471.jpg in the camera roll",
                "IMG_4471.jpg",
                "Passport photo: img_4471.jpg (camera roll).",
                "The passport photo is in the camera roll.",
            ),
        ],
    ),
    *_c(
        "quote",
        [
            (
                'The error just says "connection reset by peer" and then it exits.',
                "connection reset by peer",
                "Error: connection reset by peer, then exit.",
                "The program errors and exits.",
            ),
            (
                "The parcel tracking says “held at customs” since Tuesday.",
                "held at customs",
                'Tracking: "Held at customs" since Tuesday.',
                "Parcel stuck since Tuesday.",
            ),
            (
                'My daughter wants the cake to say "Happy 7th Birthday Lily" in pink.',
                "Happy 7th Birthday Lily",
                "Cake text: “happy 7th birthday lily”, pink.",
                "Pink birthday cake for the daughter.",
            ),
            (
                "Run `npm ci --omit=dev` on the server, not install.",
                "npm ci --omit=dev",
                "On the server use npm ci --omit=dev (not install).",
                "Use a clean install on the server.",
            ),
            (
                'The doctor said "no running for six weeks" after the knee surgery.',
                "no running for six weeks",
                "Post-surgery: No running for six weeks.",
                "Post-surgery restrictions on exercise.",
            ),
            (
                'The bank app shows "Payment pending review" for the transfer.',
                "Payment pending review",
                "Transfer status: payment pending review.",
                "The transfer is still being processed.",
            ),
            (
                'When I click save it pops up "Session expired, please log in again".',
                "Session expired, please log in again",
                "Save shows: session expired, please log in again.",
                "Saving fails with a session error.",
            ),
            (
                "The gate message said “use the side entrance after 8”",
                "use the side entrance after 8",
                'Gate message: "Use the side entrance after 8".',
                "Gate instructions were sent.",
            ),
            (
                "the reservation is under “Table for Moreau”",
                "Table for Moreau",
                'Reservation under "table for moreau".',
                "A dinner reservation was made.",
            ),
            (
                'The customer literally wrote "cancel everything and refund me" in the ticket.',
                "cancel everything and refund me",
                "Customer wrote: Cancel everything and refund me.",
                "The customer wants a refund.",
            ),
            (
                "In the sheet, name the tab `Q3 forecast` exactly or the macro breaks.",
                "Q3 forecast",
                'The sheet tab must be named "Q3 Forecast" (macro).',
                "The macro needs a specific tab name.",
            ),
            (
                'The pharmacist said to take it "with food, never on an empty stomach".',
                "with food, never on an empty stomach",
                "Take it With food, never on an empty stomach.",
                "The pharmacist gave instructions on taking it.",
            ),
            (
                "Grandpa's voicemail greeting still says \"we're at the lake until June\"",
                "we're at the lake until June",
                "Grandpa's voicemail: “We’re at the lake until June”.",
                "Grandpa's voicemail greeting is outdated.",
            ),
        ],
    ),
    *_c(
        "money",
        [
            (
                "The repair quote came to $1,850 including parts.",
                "$1,850",
                "Repair quote: $1850 incl. parts.",
                "The repair quote includes parts.",
            ),
            (
                "Hotel is €129 a night with breakfast.",
                "€129",
                "Hotel 129 EUR/night, breakfast included.",
                "The hotel price includes breakfast.",
            ),
            (
                "I was charged 49.99 dollars twice for the same order",
                "49.99 dollars",
                "Double charge of $49.99 on one order.",
                "User was charged twice for one order.",
            ),
            (
                "Lunch money for the week is £15, in an envelope.",
                "£15",
                "Weekly lunch money 15 pounds (envelope).",
                "Lunch money goes in an envelope.",
            ),
            (
                "the copay for the MRI is $250",
                "$250",
                "MRI copay 250 USD.",
                "The MRI has a copay.",
            ),
            (
                "Our cloud bill jumped to $12,400 last month",
                "$12,400",
                "Cloud bill last month: 12400 dollars.",
                "The cloud bill jumped last month.",
            ),
            (
                "Deposit for the flat is 2,100 euros, due on signing.",
                "2,100 euros",
                "Flat deposit €2100, due at signing.",
                "Flat deposit due at signing.",
            ),
            (
                "The taxi from the airport should be around ¥9000.",
                "¥9000",
                "Airport taxi about 9,000 yen.",
                "Airport taxi fare checked.",
            ),
            (
                "Refund of $37.50 was approved yesterday.",
                "$37.50",
                "Approved refund: 37.50 USD.",
                "A refund was approved.",
            ),
            (
                "I can spend up to 300 bucks on the birthday present",
                "300 bucks",
                "Birthday present budget: $300.",
                "User has a budget for the birthday present.",
            ),
            (
                "The conference fee is CHF 480 for students.",
                "CHF 480",
                "Student conference fee 480 CHF.",
                "Students pay a reduced conference fee.",
            ),
            (
                "Parking at the hospital costs £3.60 an hour, bring coins",
                "£3.60",
                "Hospital parking 3.60 GBP/hour; coins.",
                "Hospital parking is paid; bring coins.",
            ),
            (
                "The acquisition was valued at $2bn according to the memo.",
                "$2bn",
                "Acquisition valued at $2bn (memo).",
                "The acquisition's valuation is in the memo.",
            ),
            (
                "He still owes me 60 euros from the concert tickets",
                "60 euros",
                "He owes the user €60 (concert tickets).",
                "He owes the user money for concert tickets.",
            ),
        ],
    ),
    *_c(
        "date",
        [
            (
                "My flight home is on Dec 5, early morning.",
                "Dec 5",
                "Flight home dec 5, early.",
                "The flight home is early morning.",
            ),
            (
                "The lease ends 2026-08-31 and we have to give notice two months before.",
                "2026-08-31",
                "Lease ends 2026-08-31; notice two months ahead.",
                "The lease ends next summer; notice two months ahead.",
            ),
            (
                "Physio moved to Thursday because of the holiday.",
                "Thursday",
                "Physio moved to thursday (holiday).",
                "Physio was moved because of the holiday.",
            ),
            (
                "Parents' evening is on 14 November at the school hall.",
                "14 November",
                "Parents' evening 14 november, school hall.",
                "Parents' evening is at the school hall.",
            ),
            (
                "The invoice is due 3/15 or we pay a late fee.",
                "3/15",
                "Invoice due 3/15 (late fee after).",
                "The invoice is due soon, late fee after.",
            ),
            (
                "We land in Lisbon on the 22nd of July",
                "22nd of July",
                "Landing in lisbon, 22nd of july.",
                "Landing in Lisbon in the summer.",
            ),
            (
                "Release freeze starts on Monday so merge before then.",
                "Monday",
                "Release freeze from MONDAY; merge before.",
                "A release freeze is coming; merge soon.",
            ),
            (
                "Her passport expires on March 3rd, we need to renew before the trip.",
                "March 3rd",
                "Passport expires march 3rd; renew before the trip.",
                "Her passport expires soon; renew before the trip.",
            ),
            (
                "The warranty runs until 12/2027 I think",
                "12/2027",
                "Warranty until 12/2027 (not sure).",
                "The warranty is still valid.",
            ),
            (
                "The dentist can do Sept 9 in the afternoon.",
                "Sept 9",
                "Dentist offered sept 9, afternoon.",
                "The dentist offered an afternoon slot.",
            ),
            (
                "Grandma's birthday party is Saturday, at our place.",
                "Saturday",
                "Grandma's party saturday at the user's place.",
                "Grandma's party is at the user's place.",
            ),
            (
                "Quarter close is 2025-12-31 for the audit.",
                "2025-12-31",
                "Audit quarter close 2025-12-31.",
                "Quarter close is set for the audit.",
            ),
            (
                "The school trip is on the 5th of June, permission slip needed.",
                "5th of June",
                "School trip 5th of june, slip needed.",
                "The school trip needs a permission slip.",
            ),
        ],
    ),
    *_c(
        "time",
        [
            (
                "Pick-up from the airport is at 06:45.",
                "06:45",
                "Airport pick-up 6:45.",
                "Airport pick-up arranged.",
            ),
            (
                "The standup moved to 9.30 because of the new hires.",
                "9.30",
                "Standup now 9:30 (new hires).",
                "The standup moved for the new hires.",
            ),
            (
                "Her ballet class finishes at 5:15pm on weekdays.",
                "5:15pm",
                "Ballet ends 5:15 PM on weekdays.",
                "Ballet ends in the afternoon on weekdays.",
            ),
            (
                "The MRI slot is 07:10, arrive fifteen minutes early.",
                "07:10",
                "MRI at 7:10; arrive fifteen minutes early.",
                "MRI slot booked; arrive fifteen minutes early.",
            ),
            (
                "Checkout is at 11 am sharp.",
                "11 am",
                "Checkout 11am sharp.",
                "Checkout time is strict.",
            ),
            (
                "The maintenance window is 02:00 to 04:00 UTC.",
                "02:00",
                "Maintenance 2:00 to 4:00 UTC.",
                "The maintenance window is overnight UTC.",
            ),
            (
                "Our ferry leaves at 8.05pm from the north pier.",
                "8.05pm",
                "Ferry 8:05pm from the north pier.",
                "Ferry in the evening from the north pier.",
            ),
            (
                "The pharmacy closes at 6pm on Sundays.",
                "6pm",
                "Pharmacy closes 6 PM on Sundays.",
                "The pharmacy closes early on Sundays.",
            ),
            (
                "Vet appointment for the cat at 10:40 tomorrow.",
                "10:40",
                "Cat to the vet tomorrow 10:40.",
                "The cat has a vet appointment tomorrow.",
            ),
            (
                "Can you make sure I'm up by 05:30? The bus is early.",
                "05:30",
                "Wake the user by 5:30 (early bus).",
                "The user needs an early wake-up for the bus.",
            ),
            (
                "the webinar starts 4 p.m. Eastern",
                "4 p.m.",
                "Webinar 4 PM Eastern.",
                "Webinar in the afternoon, Eastern.",
            ),
            (
                "The kids' swim lesson is at 4.30pm.",
                "4.30pm",
                "Kids' swim lesson at 4.30pm, per the user.",
                "The kids have a swim lesson, per the user.",
            ),
            (
                "The last train back is 23:52, don't miss it.",
                "23:52",
                "Last train back 23:52.",
                "The last train back is late at night.",
            ),
            (
                "Kids need to be at school by 8:20 on Wednesdays.",
                "8:20",
                "School drop-off by 08:20 on Wednesdays.",
                "School drop-off on Wednesdays is early.",
            ),
        ],
    ),
    *_c(
        "code",
        [
            (
                "My order number is BX-20931 if that helps.",
                "BX-20931",
                "Order bx-20931.",
                "The user has an order number.",
            ),
            (
                "The booking reference is QZ7P4K for both of us.",
                "QZ7P4K",
                "Booking ref qz7p4k (both travellers).",
                "One booking reference covers both travellers.",
            ),
            (
                "Ticket #5521 is about the login loop.",
                "#5521",
                "#5521: login loop.",
                "A ticket is open about the login loop.",
            ),
            (
                "We're in seat 23F and the kid is next to us.",
                "23F",
                "Seat 23f, kid next to them.",
                "Seated together with the kid.",
            ),
            (
                "The part I need is a 6204-2RS bearing",
                "6204-2RS",
                "Needs a 6204-2rs bearing.",
                "Needs a replacement bearing.",
            ),
            (
                "Error code E1107 came back on the dishwasher.",
                "E1107",
                "Dishwasher error e1107 again.",
                "The dishwasher shows an error again.",
            ),
            (
                "The failing commit is 9f3c2ab, revert that one.",
                "9f3c2ab",
                "Revert commit 9F3C2AB.",
                "Revert the failing commit.",
            ),
            (
                "Prescription ref RX-448812 at the pharmacy counter",
                "RX-448812",
                "Pharmacy ref rx-448812.",
                "The prescription is ready at the pharmacy counter.",
            ),
            (
                "Gate changed to B14.",
                "B14",
                "Gate now b14.",
                "The gate changed.",
            ),
            (
                "Use promo code SPRING25 at checkout.",
                "SPRING25",
                "Promo spring25 at checkout.",
                "There is a promo code for checkout.",
            ),
            (
                "Our room is 4B on the second floor.",
                "4B",
                "Room 4b, second floor.",
                "The room is on the second floor.",
            ),
            (
                "My library card number is LIB00391 and it expired.",
                "LIB00391",
                "Library card lib00391 expired.",
                "The library card expired.",
            ),
            (
                "Flight UA2417 is delayed again.",
                "UA2417",
                "Flight ua2417 delayed again.",
                "The flight is delayed again.",
            ),
        ],
    ),
    *_c(
        "number",
        [
            (
                "We expect about 1,200 attendees this year.",
                "1,200",
                "About 1200 attendees expected this year.",
                "Attendance is expected to grow this year.",
            ),
            (
                "The apartment is 68 square metres.",
                "68",
                "Apartment: 68 m².",
                "The apartment size was given.",
            ),
            (
                "My blood pressure was 135 over 85 this morning.",
                "135",
                "BP 135/85 this morning.",
                "Blood pressure was a bit high this morning.",
            ),
            (
                "The script processes 48000 rows before it dies.",
                "48000",
                "The script dies after 48,000 rows.",
                "The script dies partway through.",
            ),
            (
                "We're on floor 17, take the left elevators.",
                "17",
                "Floor 17, left elevators.",
                "Take the left elevators.",
            ),
            (
                "The hike is 14.5 km with a lot of climbing.",
                "14.5",
                "Hike 14.5 km, steep.",
                "The hike is long and steep.",
            ),
            (
                "My son weighs 31 kg, what dose of ibuprofen?",
                "31",
                "Son weighs 31 kg.",
                "The user asked about an ibuprofen dose for their son.",
            ),
            (
                "The queue has 3,482 unprocessed messages.",
                "3,482",
                "3482 unprocessed messages in the queue.",
                "There is a backlog in the queue.",
            ),
            (
                "Our house number is 221, the blue door.",
                "221",
                "House 221, blue door.",
                "The house with the blue door.",
            ),
            (
                "The package weighs 2.3 kilos so shipping is more.",
                "2.3",
                "Package 2.3 kg, shipping costs more.",
                "The package is heavy, shipping costs more.",
            ),
            (
                "The timeout is set to 30 seconds in prod.",
                "30",
                "Prod timeout 30 s.",
                "Prod has a short timeout.",
            ),
            (
                "I've got 12 people confirmed for dinner.",
                "12",
                "12 confirmed for dinner.",
                "Dinner guests confirmed.",
            ),
            (
                "Her temperature was 38.6 last night",
                "38.6",
                "Temperature 38.6 last night.",
                "She had a fever last night.",
            ),
            (
                "we have 25000 users on the free tier",
                "25000",
                "25,000 free-tier users.",
                "Many users are on the free tier.",
            ),
        ],
    ),
    *_c(
        "count",
        [
            (
                "We have three kids, so we need a family room.",
                "three",
                "Three kids; family room needed.",
                "Kids; a family room is needed.",
            ),
            (
                "I need a dozen eggs and some flour.",
                "dozen",
                "Buy a Dozen eggs and flour.",
                "Buy eggs and flour.",
            ),
            (
                "Only two of the servers are still responding.",
                "two",
                "Two servers still respond.",
                "Some servers still respond.",
            ),
            (
                "She takes the tablets twice a day for five days.",
                "five",
                "Tablets twice a day for Five days.",
                "Tablets twice a day.",
            ),
            (
                "We'll be four adults and a toddler.",
                "four",
                "Four adults and a toddler.",
                "Adults and a toddler.",
            ),
            (
                "The course runs for eight weeks.",
                "eight",
                "Course: EIGHT weeks.",
                "The course runs for some weeks.",
            ),
            (
                "I've called them six times already.",
                "six",
                "Called them six times.",
                "The user has called them repeatedly.",
            ),
            (
                "There are fifteen people on the waiting list ahead of me.",
                "fifteen",
                "Fifteen ahead on the waiting list.",
                "The user is on the waiting list.",
            ),
            (
                "Pack seven outfits, the trip is a week.",
                "seven",
                "Pack Seven outfits (a week).",
                "Pack outfits for a week.",
            ),
            (
                "We need twenty chairs for the party.",
                "twenty",
                "Twenty chairs for the party.",
                "Chairs needed for the party.",
            ),
            (
                "The invoice lists nine line items but we ordered more.",
                "nine",
                "Invoice: Nine line items, fewer than ordered.",
                "The invoice doesn't match the order.",
            ),
            (
                "He sleeps about eleven hours a night.",
                "eleven",
                "Sleeps about Eleven hours.",
                "Sleeps a lot.",
            ),
            (
                "Grab half a dozen bagels on your way.",
                "half a dozen",
                "Half a dozen bagels on the way.",
                "Grab bagels on the way.",
            ),
        ],
    ),
    *_c(
        "name",
        [
            (
                "Our landlord is Mr Okonkwo, he lives upstairs.",
                "Mr Okonkwo",
                "Landlord mr. okonkwo lives upstairs.",
                "The landlord lives upstairs.",
            ),
            (
                "I'm seeing Dr Abernathy about the rash on Monday.",
                "Dr Abernathy",
                "Rash appointment with dr. abernathy, Monday.",
                "Rash appointment on Monday.",
            ),
            (
                "We're staying at the Hôtel Belvédère in the old town.",
                "Hôtel Belvédère",
                "Staying at Hotel Belvedere, old town.",
                "Staying at a hotel in the old town.",
            ),
            (
                "The pull request was reviewed by Chidi yesterday.",
                "Chidi",
                "PR reviewed by CHIDI.",
                "The PR was reviewed yesterday.",
            ),
            (
                "My sister Ingrid is picking the kids up.",
                "Ingrid",
                "ingrid (sister) picks up the kids.",
                "The user's sister picks up the kids.",
            ),
            (
                "The restaurant is on Rue Oberkampf, near the metro.",
                "Rue Oberkampf",
                "Restaurant: rue oberkampf, near the metro.",
                "The restaurant is near the metro.",
            ),
            (
                "Ask for Tomasz at the front desk, he has the keys.",
                "Tomasz",
                "Keys with tomasz at the front desk.",
                "Keys at the front desk.",
            ),
            (
                "The vendor we're switching to is Northwind Logistics.",
                "Northwind Logistics",
                "Switching vendor to northwind logistics.",
                "Switching vendors.",
            ),
            (
                "Her paediatrician is Dr Siobhán Kelly.",
                "Dr Siobhán Kelly",
                "Paediatrician: dr siobhan kelly.",
                "She has a paediatrician.",
            ),
            (
                "Send it to Aiko in accounting.",
                "Aiko",
                "Send to aiko, accounting.",
                "Send it to accounting.",
            ),
            (
                "We're flying into Reykjavík first.",
                "Reykjavík",
                "Flying into reykjavik first.",
                "Flying to Iceland first.",
            ),
            (
                "The new hire, Mateo Fernández, starts next week.",
                "Mateo Fernández",
                "Mateo Fernandez starts next week.",
                "A new hire starts next week.",
            ),
            (
                "Dr Patel's office moved to the third floor.",
                "Dr Patel's",
                "Dr Patel: office moved to the third floor.",
                "The doctor's office moved to the third floor.",
            ),
            (
                "Take the kids to Lakeside Park after lunch.",
                "Lakeside Park",
                "Kids to lakeside park after lunch.",
                "Kids to the park after lunch.",
            ),
        ],
    ),
    *_c(
        "value",
        [
            (
                "The dog is called pickle, he's a beagle.",
                "pickle",
                "Dog: Pickle (beagle).",
                "The user has a beagle.",
            ),
            (
                "The new service is named tallow internally.",
                "tallow",
                "Internal service name: Tallow.",
                "There is a new internal service.",
            ),
            (
                "my username there is greenfinch",
                "greenfinch",
                "Username there: Greenfinch.",
                "The user has an account there.",
            ),
            (
                "Her favourite colour is teal so maybe a teal scarf.",
                "teal",
                "Favourite colour TEAL; scarf idea.",
                "Gift idea: a scarf.",
            ),
            (
                "The boat is called Sea Breeze, it's the blue one.",
                "Sea Breeze",
                "Boat: sea breeze (the blue one).",
                "The boat is the blue one.",
            ),
            (
                "The shared folder is called onboarding-docs",
                "onboarding-docs",
                "Shared folder Onboarding-Docs.",
                "There is a shared folder for onboarding.",
            ),
            (
                "The cat's name is Biscuit.",
                "Biscuit",
                "Cat: biscuit.",
                "The user has a cat.",
            ),
            (
                "The garage passcode is saffron, don't share it.",
                "saffron",
                "Garage passcode Saffron (private).",
                "The garage has a passcode (private).",
            ),
            (
                "We named the kitten Miso.",
                "Miso",
                "Kitten: miso.",
                "The user has a new kitten.",
            ),
            (
                "The theme is set to solarized dark on my machine.",
                "solarized dark",
                "Theme: Solarized Dark.",
                "The user prefers a dark theme.",
            ),
            (
                "My nickname at work is Bean.",
                "Bean",
                "Work nickname: bean.",
                "The user has a work nickname.",
            ),
            (
                "The default branch was renamed to trunk last week.",
                "trunk",
                "Default branch is now trunk (renamed last week).",
                "The default branch was renamed last week.",
            ),
            (
                "The horse she rides is called Juniper.",
                "Juniper",
                "She rides juniper.",
                "She rides a horse at the stables.",
            ),
            (
                "Her favourite flavour is pistachio, always.",
                "pistachio",
                "Favourite flavour: PISTACHIO.",
                "She has a favourite ice cream flavour.",
            ),
        ],
    ),
)

# -- documented limits -----------------------------------------------------------------

LIMITS: tuple[Limit, ...] = (
    Limit(
        "email",
        "paraphrase",
        "Write to ops@fleetline.io about the outage.",
        "ops@fleetline.io",
        "Write to the ops address at fleetline.io about the outage.",
    ),
    Limit(
        "email",
        "no shape",
        "my email is priya at contoso dot com",
        "priya at contoso dot com",
        "The user gave an email address.",
    ),
    Limit(
        "url",
        "paraphrase",
        "The status page is https://status.fleetline.io",
        "https://status.fleetline.io",
        "Status page: status.fleetline.io",
    ),
    Limit(
        "url",
        "no shape",
        "sign up on ledgerly.com first, it's free",
        "ledgerly.com",
        "Sign up first, it's free.",
    ),
    Limit(
        "path",
        "paraphrase",
        "The host alias is in ~/.ssh/config on my laptop.",
        "~/.ssh/config",
        "The host alias is in the ssh config in the home directory.",
    ),
    Limit(
        "path",
        "no shape",
        "the contract is in my downloads folder somewhere",
        "downloads folder",
        "The contract was downloaded.",
    ),
    Limit(
        "quote",
        "paraphrase",
        'The sign says "closed for renovation until spring".',
        "closed for renovation until spring",
        "The sign says it's shut for works until spring.",
    ),
    Limit(
        "quote",
        "no shape",
        "the error says disk quota exceeded when I upload",
        "disk quota exceeded",
        "Uploads fail with an error.",
    ),
    Limit(
        "money",
        "paraphrase",
        "The cleaner charges $40 per visit.",
        "$40",
        "The cleaner charges forty dollars per visit.",
    ),
    Limit(
        "money",
        "paraphrase",
        "Budget for the laptop is $1.2k max.",
        "$1.2k",
        "Laptop budget at most $1,200.",
    ),
    Limit(
        "date",
        "paraphrase",
        "The hearing is on Dec 5.",
        "Dec 5",
        "Hearing on 12/05.",
    ),
    Limit(
        "date",
        "paraphrase",
        "The plumber comes on the 9th in the morning.",
        "9th",
        "The plumber comes next Tuesday morning.",
    ),
    Limit(
        "date",
        "common-word name",
        "We're moving to the new flat in May.",
        "May",
        "Moving to the new flat soon.",
    ),
    Limit(
        "date",
        "no shape",
        "The delivery is the day after tomorrow.",
        "the day after tomorrow",
        "A delivery is coming.",
    ),
    Limit(
        "time",
        "paraphrase",
        "Dinner reservation at 17:30.",
        "17:30",
        "Dinner reservation at half past five.",
    ),
    Limit(
        "time",
        "no shape",
        "let's do the call at noon",
        "noon",
        "A call was planned.",
    ),
    Limit(
        "code",
        "paraphrase",
        "The claim number is AB-1234.",
        "AB-1234",
        "Claim number AB1234.",
    ),
    Limit(
        "code",
        "lower case, no cue",
        "just use the voucher springsale at checkout",
        "springsale",
        "There is a voucher for checkout.",
    ),
    Limit(
        "number",
        "paraphrase",
        "We have 3 cats.",
        "3",
        "They have three cats.",
    ),
    Limit(
        "number",
        "paraphrase",
        "The run is 2.5 km along the river.",
        "2.5",
        "The run is 2,500 m along the river.",
    ),
    Limit(
        "number",
        "no shape",
        "we only have one car now",
        "one",
        "They have fewer cars now.",
    ),
    Limit(
        "count",
        "paraphrase",
        "She has four grandchildren.",
        "four",
        "She has 4 grandchildren.",
    ),
    Limit(
        "count",
        "no shape",
        "I'll bring a couple of folding tables.",
        "a couple",
        "The user will bring folding tables.",
    ),
    Limit(
        "name",
        "common-word name",
        "Will is collecting the keys from the agent.",
        "Will",
        "Someone is collecting the keys from the agent.",
    ),
    Limit(
        "name",
        "common-word name",
        "May said she can cover my shift.",
        "May",
        "A colleague can cover the shift.",
    ),
    Limit(
        "name",
        "lower case, no cue",
        "my cousin sarah is coming for the weekend",
        "sarah",
        "A cousin is coming for the weekend.",
    ),
    Limit(
        "name",
        "lower case, no cue",
        "ask tomasz at the front desk for the keys",
        "tomasz",
        "Keys at the front desk.",
    ),
    Limit(
        "name",
        "paraphrase",
        "Robert from legal signed off on it.",
        "Robert",
        "Bob from legal signed off on it.",
    ),
    Limit(
        "value",
        "lower case, no cue",
        "our dog pickle hates the vacuum",
        "pickle",
        "The dog hates the vacuum.",
    ),
    Limit(
        "value",
        "paraphrase",
        "The editor theme is set to solarized dark.",
        "solarized dark",
        "The editor uses a dark theme.",
    ),
    Limit(
        "none",
        "no shape",
        "The meeting is cancelled.",
        "cancelled",
        "There was a meeting.",
    ),
    Limit(
        "none",
        "no shape",
        "the parcel arrived damaged",
        "damaged",
        "The parcel arrived.",
    ),
    Limit(
        "none",
        "no shape",
        "we decided to go with the cheaper plan",
        "cheaper plan",
        "A plan was decided.",
    ),
    Limit(
        "none",
        "no shape",
        "he is allergic to peanuts",
        "allergic to peanuts",
        "He has an allergy.",
    ),
)

#: Turns with no fact in them: whatever ``details()`` finds here is over-flagging.
CHITCHAT: tuple[str, ...] = (
    "Sounds good, thanks!",
    "haha that's hilarious",
    "Morning all, how's everyone doing?",
    "Honestly I'm exhausted today.",
    "Can't wait for the weekend.",
    "Let me think about it and get back to you.",
    "That makes sense, thanks for explaining.",
    "No worries at all.",
    "Ugh, this week is dragging.",
    "Lol same",
    "Love that idea!",
    "Did you sleep well?",
    "I'm not sure what you mean, could you rephrase?",
    "Awesome, that worked perfectly.",
    "Oops, my bad.",
    "Hmm, I'm not convinced.",
    "That's so kind of you.",
    "She's been really helpful lately.",
    "Whatever you think is best.",
    "Good night, talk tomorrow.",
    "Wow, I didn't expect that.",
    "Fair enough.",
    "Cool cool cool.",
    "Ok let's try again.",
    "Nah, it's fine, don't worry about it.",
    "Thank you so much, you're a lifesaver!",
    "Could you explain that a bit more simply?",
    "Anyway, enough about me.",
    "He's always like that, don't take it personally.",
    "Kids are finally asleep.",
    "Weather's been lovely lately.",
    "Coffee first, then we talk.",
    "Traffic was awful this morning.",
    "Not a big deal.",
    "Tell me more!",
    "Exactly what I was thinking.",
    "We'll figure it out.",
    "Happy to help anytime.",
    "Makes sense, go ahead.",
    "Just checking in.",
    "Brilliant, cheers.",
    "Yeah that's fair, I'll sleep on it.",
)


# -- measuring -------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """Per shape: sentences, and how many were caught, falsely flagged, not seen."""

    sentences: int = 0
    caught: int = 0
    false_alarm: int = 0
    unseen: int = 0
    incidental: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    case: Case
    found: tuple[Detail, ...]
    caught: bool
    false_alarm: bool
    incidental: tuple[Detail, ...]


def _at(said: str, detail: str) -> tuple[int, int]:
    start = said.find(detail)
    if start < 0:
        raise ValueError(f"{detail!r} is not said in {said!r}")
    return start, start + len(detail)


def _over(d: Detail, span: tuple[int, int]) -> bool:
    return d.start < span[1] and span[0] < d.end


def _flagged(found: Sequence[Detail], said: str, memory: str) -> set[tuple[int, int]]:
    lacking = {(d.start, d.end) for d in missing(said, normalize(memory))}
    return {(d.start, d.end) for d in found} & lacking


def outcome(case: Case) -> Outcome:
    """What the check makes of one case."""
    span = _at(case.said, case.detail)
    if normalize(case.detail) in normalize(case.omitted):
        raise ValueError(f"the memory that leaves it out says {case.detail!r}")
    all_found = details(case.said)
    found = tuple(d for d in all_found if _over(d, span))
    lacking_carried = missing(case.said, normalize(case.carried))
    incidental = tuple(d for d in lacking_carried if not _over(d, span))
    return Outcome(
        case=case,
        found=found,
        caught=bool(_flagged(found, case.said, case.omitted)),
        false_alarm=bool(_flagged(found, case.said, case.carried)),
        incidental=incidental,
    )


def limit_holds(limit: Limit) -> bool:
    """Whether a documented limit behaves as documented: a paraphrase is flagged though
    the memory carries it, every other kind is not recognised at all."""
    span = _at(limit.said, limit.detail)
    found = [d for d in details(limit.said) if _over(d, span)]
    if limit.kind == "paraphrase":
        return bool(found) and bool(_flagged(found, limit.said, limit.memory))
    return not found


def measure(cases: Sequence[Case] = CASES) -> tuple[dict[str, Tally], list[Outcome]]:
    """Per-shape tallies (in the module's shape order) and every outcome."""
    tallies = {shape: Tally() for shape in get_args(DetailShape)}
    outcomes = [outcome(c) for c in cases]
    for o in outcomes:
        t = tallies[o.case.shape]
        t.sentences += 1
        t.caught += o.caught
        t.false_alarm += o.false_alarm
        t.unseen += not o.found
        t.incidental += bool(o.incidental)
    return tallies, outcomes


def _share(n: int, of: int) -> str:
    return f"{n}/{of} ({100 * n / of:.0f} %)" if of else "—"


def table(tallies: dict[str, Tally], chitchat: Sequence[str] = CHITCHAT) -> str:
    """The markdown table of per-shape results, a total row and the chit-chat row."""
    rows = [
        "| shape | sentences | caught when missing | flagged though carried | not recognised |",
        "|---|---:|---:|---:|---:|",
    ]
    total = Tally()
    for shape, t in tallies.items():
        if not t.sentences:
            continue
        rows.append(
            f"| {shape} | {t.sentences} | {_share(t.caught, t.sentences)} "
            f"| {_share(t.false_alarm, t.sentences)} | {_share(t.unseen, t.sentences)} |"
        )
        total.sentences += t.sentences
        total.caught += t.caught
        total.false_alarm += t.false_alarm
        total.unseen += t.unseen
    rows.append(
        f"| **all** | {total.sentences} | {_share(total.caught, total.sentences)} "
        f"| {_share(total.false_alarm, total.sentences)} "
        f"| {_share(total.unseen, total.sentences)} |"
    )
    yielding = sum(1 for s in chitchat if details(s))
    rows.append(
        f"| chit-chat, no fact stated | {len(chitchat)} | — "
        f"| {_share(yielding, len(chitchat))} yield a detail | — |"
    )
    return "\n".join(rows)


def limits_table(limits: Sequence[Limit] = LIMITS) -> tuple[str, list[Limit]]:
    """The markdown table of documented limits by kind, and those that did not behave
    as documented."""
    kinds: dict[str, list[bool]] = {}
    deviating: list[Limit] = []
    for limit in limits:
        holds = limit_holds(limit)
        kinds.setdefault(limit.kind, []).append(holds)
        if not holds:
            deviating.append(limit)
    expected = {
        "paraphrase": "flagged though carried",
        "common-word name": "not recognised",
        "lower case, no cue": "not recognised",
        "no shape": "not recognised",
    }
    rows = ["| documented limit | cases | expected | as documented |", "|---|---:|---|---:|"]
    for kind in expected:
        held = kinds.get(kind, [])
        if not held:
            continue
        rows.append(f"| {kind} | {len(held)} | {expected[kind]} | {sum(held)}/{len(held)} |")
    return "\n".join(rows), deviating


def _show(d: Detail) -> str:
    return f"{d.shape} {d.text!r}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--verbose", action="store_true", help="list every miss and alarm")
    args = parser.parse_args(argv)
    tallies, outcomes = measure()
    print(table(tallies))
    print()
    limits, deviating = limits_table()
    print(limits)
    incidental = sum(1 for o in outcomes if o.incidental)
    print()
    print(
        f"Besides the stated detail, {incidental} of {len(outcomes)} turns hold another "
        "detail the carrying memory does not say (a sentence-opening word read as a name, "
        "a second word taken into a value…): an excerpt is kept for it."
    )
    if not args.verbose:
        return
    print()
    for o in outcomes:
        c = o.case
        notes = []
        if not o.found:
            notes.append("not recognised")
        elif not o.caught:
            notes.append("not caught: " + ", ".join(_show(d) for d in o.found))
        if o.false_alarm:
            notes.append("flagged though carried: " + ", ".join(_show(d) for d in o.found))
        if o.incidental:
            notes.append("incidental: " + ", ".join(_show(d) for d in o.incidental))
        if notes:
            print(f"- [{c.shape}] {c.said!r} -> {'; '.join(notes)}")
    for limit in deviating:
        found = details(limit.said)
        print(
            f"- [limit {limit.shape}, {limit.kind}] {limit.said!r} not as documented: "
            + (", ".join(_show(d) for d in found) or "nothing found")
        )
    yielding = [(s, details(s)) for s in CHITCHAT]
    for s, found in yielding:
        if found:
            print(f"- [chit-chat] {s!r} -> {', '.join(_show(d) for d in found)}")


if __name__ == "__main__":
    main()
