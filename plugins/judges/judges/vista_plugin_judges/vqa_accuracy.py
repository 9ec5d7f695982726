"""VQA accuracy (VQA v2, VizWiz, A-OKVQA direct answers): ten people answered each question, and
an answer counts as fully right once three of them gave it, ``min(#humans who said it / 3, 1)``.

The official evaluation averages that over the ten leave-one-annotator-out subsets of nine, so
that a prediction matching 2 of 10 people scores 0.6, not 0.667; that is the default here
(``leave_one_out=False`` gives the plain formula; with three answers or fewer it is always used).  Answers are compared after the official
normalisation: lower case, punctuation dropped (a comma inside a number too, a period only when it
is not a decimal point), number words up to ten as digits, articles dropped, common contractions
restored ("dont" -> "don't").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from vista_rl import Judge, JudgeResult

_PUNCTUATION = [";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@",
                "`", ",", "?", "!"]
_DIGIT_COMMA = re.compile(r"(\d)(,)(\d)")
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
_NUMBERS = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
            "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
_ARTICLES = {"a", "an", "the"}
_CONTRACTIONS = {word.replace("'", ""): word for word in (
    "aren't", "can't", "couldn't", "couldn't've", "didn't", "doesn't", "don't", "hadn't", "hasn't",
    "haven't", "he'd", "he'll", "he's", "how'd", "how'll", "how's", "i'd", "i'll", "i'm", "i've",
    "isn't", "it'd", "it'll", "it's", "let's", "ma'am", "mightn't", "might've", "mustn't", "must've",
    "needn't", "o'clock", "oughtn't", "shan't", "she'd", "she'll", "she's", "should've", "shouldn't",
    "that's", "there's", "they'd", "they'll", "they're", "they've", "wasn't", "we'd", "we'll", "we're",
    "we've", "weren't", "what's", "where's", "who's", "won't", "would've", "wouldn't", "y'all",
    "you'd", "you'll", "you're", "you've")}
MAX_ANSWER_CHARS = 200  # a VQA answer is a few words; longer text cannot equal a human answer


def normalize_vqa_answer(text: Any) -> str:
    """The VQA evaluation's answer normalisation (see the module docstring)."""
    value = "" if text is None else str(text)
    value = value.replace("\n", " ").replace("\t", " ").strip().lower()
    for mark in _PUNCTUATION:
        if f"{mark} " in value or f" {mark}" in value or _DIGIT_COMMA.search(value):
            value = value.replace(mark, "")
        else:
            value = value.replace(mark, " ")
    value = _PERIOD.sub("", value)
    words = []
    for word in value.split():
        word = _NUMBERS.get(word, word)
        if word in _ARTICLES:
            continue
        words.append(_CONTRACTIONS.get(word, word))
    return " ".join(words)


def _comparable(text: Any) -> str:
    """The official normalisation, or, where it leaves nothing (the answer is an article: "a",
    "the" -- a letter on a sign, an option label), the answer lower-cased and stripped.  The
    official script scores such an answer 0 for everyone; a reward that no answer can earn is a
    bug, so we differ here on purpose (plugins/judges/judges/README.md)."""
    normalized = normalize_vqa_answer(text)
    if normalized:
        return normalized
    return " ".join(("" if text is None else str(text)).lower().split()).strip(".")


def vqa_accuracy(prediction: Any, answers: Sequence[Any], leave_one_out: bool = True) -> float:
    """Accuracy of one prediction against the human answers (usually ten)."""
    if not answers:
        return 0.0
    predicted = _comparable(prediction)
    if not predicted:
        return 0.0
    matches = [_comparable(answer) == predicted for answer in answers]
    if not leave_one_out or len(answers) <= 3:  # with three or fewer, leaving one out caps the score
        return min(sum(matches) / 3.0, 1.0)
    total = sum(matches)
    return sum(min((total - own) / 3.0, 1.0) for own in matches) / len(matches)


class VQAAccuracyJudge(Judge):
    """``reference`` is the list of human answers (duplicates kept: they are the votes); a single
    string counts as one answer given by three people."""

    name = "vqa_accuracy"

    def __init__(self, leave_one_out: bool = True) -> None:
        self.leave_one_out = leave_one_out

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        if isinstance(reference, (list, tuple)):
            answers = [str(answer) for answer in reference if answer is not None]
        else:
            answers = [str(reference)] * 3
        if not isinstance(prediction, (str, int)) or isinstance(prediction, bool):
            return JudgeResult(0.0, {"reason": f"prediction is a {type(prediction).__name__}, not text"})
        text = str(prediction)
        if len(text) > MAX_ANSWER_CHARS:
            return JudgeResult(0.0, {"reason": f"prediction longer than {MAX_ANSWER_CHARS} characters"})
        value = vqa_accuracy(text, answers, self.leave_one_out)
        predicted = _comparable(text)
        return JudgeResult(value, {"prediction": predicted, "humans": len(answers),
                                   "matching": sum(_comparable(a) == predicted for a in answers) if predicted else 0})
