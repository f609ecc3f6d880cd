"""Sentence units of corpus text, shared by train_default.py (which cuts its training and held-out pairs from
them) and make_heldout_text.py (which must cut exactly the same units to find the held-out block). Standard
library only, so that make_heldout_text.py needs no torch."""
import re

SENT_END = re.compile(r"(?<=[.!?»\"”])\s+")


def units_of(lines, max_chars):
    """Cut paragraphs into units of whole sentences up to max_chars (a longer sentence is cut at
    a space), so a chat pair is a short prompt and a short continuation."""
    out = []
    for line in lines:
        cur = ""
        for sent in SENT_END.split(line.strip()):
            while len(sent) > max_chars:
                cut = sent.rfind(" ", 0, max_chars)
                cut = cut if cut > 0 else max_chars
                if cur:
                    out.append(cur)
                    cur = ""
                out.append(sent[:cut].strip())
                sent = sent[cut:].strip()
            if cur and len(cur) + 1 + len(sent) > max_chars:
                out.append(cur)
                cur = ""
            cur = (cur + " " + sent).strip()
        if cur:
            out.append(cur)
    return [u for u in out if u]
