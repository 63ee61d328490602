"""Word tables and span bookkeeping of the HIPAA corpus generator (:mod:`.hipaa`)."""

from __future__ import annotations

from dataclasses import dataclass, field

Gold = list[tuple[int, int, str]]

TOPICS = """weather|cheap flights|pizza delivery|used cars|mortgage rates|lyrics|recipes|jobs|apartments for rent|
homes for sale|movie times|news|bank|credit union|dentist|pediatrician|urgent care|hospital|pharmacy|
high school|elementary school|community college|library|post office|dmv|court records|property tax|
restaurants|chinese food|mexican restaurant|car wash|auto repair|tire shop|hair salon|nail salon|gym|
yoga classes|dog grooming|vet clinic|animal shelter|church|funeral home|florist|bakery|coffee shop|
hotels|motels|bed and breakfast|golf course|bowling alley|movie theater|flea market|farmers market|
craigslist|classifieds|garage sales|auctions|real estate|newspaper|radio station|tv listings|
school closings|traffic|gas prices|zip code|area code|map|directions|population|history|
police department|fire department|city hall|county jail|water department|electric company""".replace("\n", "").split(
    "|"
)
ORDINARY = """may weather forecast|will and grace|rose garden|jordan shoes|paris hotels|virginia beach hotels|
april showers|summer camp|hope chest|grace church|christian music|georgia lottery|dallas cowboys|
houston rockets|jackson hole|madison square garden|charlotte bobcats|lincoln navigator|ford mustang|
victoria secret|carolina panthers|sandy beach|amber alert|chase bank|wells fargo|john deere tractors|
harley davidson parts|jack daniels|king james bible|june bug|bill pay|will power|
may day|rose bowl|ruby tuesday menu|tiffany lamps|crystal meth|dawn dish soap|angel fire|
autumn leaves|august rush|art supplies|bob evans restaurant|ray ban sunglasses|jean jacket|
grant park|marshall fields|kelly blue book|
florence italy|sydney australia|london england|rome italy|denver broncos|phoenix suns|orlando magic|
heather plants|iris flower|lily pad|violet color|ginger ale|brandy glasses|
rich dad poor dad|chuck e cheese|lane bryant|ann taylor loft|
jenny craig diet|penny stocks|sterling silver|gene therapy|
earl grey tea|duke university|baby names|family guy|
tom and jerry|harry potter|winnie the pooh|
santa fe|san diego zoo|los angeles lakers|new york yankees|st louis cardinals|
boston red sox|chicago bears|detroit pistons|miami dolphins|seattle seahawks|atlanta falcons|
4 wheel drive|3 bedroom house|2006 ford ranger|1999 honda civic|windows xp sp2|firefox 1.5.0.4|
ipod 30gb|route 66|i-95 traffic|1-800 contacts|7-11|24 hour fitness|1000 islands|
2007 calendar|march 2006 calendar|super bowl xl|apollo 13|catch 22|area 51|fahrenheit 451|
top 40 songs|under 18|50 cent|blink 182|matchbox 20|3 doors down|ps2 cheats|xbox 360|mp3 players|
windows 98|office 2003|nascar 2006|madden 2007|version 2.0.1.5|python 2.4.3|java 1.5.0.6|
10000 bc|$25000 loans|55 inch tv|2500 calories|90 day fiancé|101 dalmatians|
myspace.com|google.com|ebay.com|yahoo.com|www.myspace.com|www.google.com/maps|mapquest.com|
amazon.com books|cnn.com|weather.com|aol.com|hotmail.com|bankofamerica.com|
orange juice|cook book|summit racing|county fair|pinewood derby""".replace("\n", "").split("|")
MODIFIERS = [
    "cheap",
    "best",
    "free",
    "new",
    "used",
    "local",
    "online",
    "discount",
    "top",
    "easy",
    "homemade",
    "vintage",
    "official",
    "",
]
STREET_NAMES = """main|oak|maple|pine|cedar|elm|washington|lake|hill|park|church|walnut|spring|north|ridge|
lincoln|jackson|madison|franklin|jefferson|market|broad|water|center|highland|sunset|river|cherry|
chestnut|1st|2nd|3rd|4th|5th|6th|7th|8th|9th|10th|12th|23rd|42nd|55th|mill|school|union|prospect""".replace(
    "\n", ""
).split("|")
SUFFIXES = [
    "st",
    "street",
    "ave",
    "avenue",
    "rd",
    "road",
    "blvd",
    "dr",
    "drive",
    "ln",
    "lane",
    "ct",
    "court",
    "way",
    "pl",
    "place",
    "pkwy",
    "cir",
    "ter",
    "hwy",
]
UNITS = ("apt 4b", "apt 12", "suite 200", "unit 3", "# 5", "apt. 2")
DIRS = ("n", "s", "e", "w", "north", "south", "east", "west", "n.", "sw")
MAIL = ("aol.com", "hotmail.com", "yahoo.com", "gmail.com", "msn.com", "comcast.net", "earthlink.net", "sbcglobal.net")
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
PERSON_CTX = (
    "{}",
    "{} obituary",
    "{} myspace",
    "{} phone number",
    "where is {}",
    "{} {bigcity}",
    "find {}",
    "{} attorney",
    "{} arrested",
    "dr {}",
    "{} wedding",
    "{} address",
    "{} facebook",
    "{} {state}",
    "{} funeral home",
    "{} realtor",
    "{} class of 1998",
    "{} email",
    "pictures of {}",
    "{} resume",
)

#: Ordinary words that are also first names (``may weather``): ordinary queries use them as traps.
NAME_LIKE_WORDS = [
    "may",
    "will",
    "rose",
    "grace",
    "hope",
    "june",
    "april",
    "faith",
    "joy",
    "rich",
    "bill",
    "mark",
    "frank",
    "art",
    "sunny",
    "dawn",
    "summer",
    "chase",
    "lane",
    "wells",
    "bob",
]


@dataclass
class Builder:
    """Joins parts into a query, recording the spans of identifier parts."""

    parts: list[tuple[str, str | None]] = field(default_factory=list)

    def add(self, text: str, kind: str | None = None) -> Builder:
        if text:
            self.parts.append((text, kind))
        return self

    def build(self) -> tuple[str, Gold]:
        out, gold, pos = [], [], 0
        for i, (text, kind) in enumerate(self.parts):
            if i:
                out.append(" ")
                pos += 1
            if kind:
                gold.append((pos, pos + len(text), kind))
            out.append(text)
            pos += len(text)
        return "".join(out), gold


def cumulative(weights: list[float]) -> list[float]:
    out, total = [], 0.0
    for w in weights:
        total += w
        out.append(total)
    return out
