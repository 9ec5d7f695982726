"""Faithful re-implementations of each benchmark's OFFICIAL scoring rule, for the parity tests in
test_official_parity.py.  Each function follows its source line by line (quirks kept); the source is
cited above it as repository, path and commit.  Written out here rather than imported because the
official scripts are not packages (they load datasets, call OpenAI, or need CUDA at import).
"""

from __future__ import annotations

import contextlib
import re
import string
from typing import Any


def _edit_distance(a: str, b: str) -> int:
    """Plain Levenshtein distance (what ``Levenshtein.distance`` / ``editdistance.eval`` return)."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


# ChartQA relaxed accuracy: google-research/pix2struct, pix2struct/metrics.py @ 5b086ef5269a80d89fbdd37bdba263e492e83149
# (relaxed_correctness; ChartQA's paper cites this rule; lmms-eval's chartqa task copies it).
def chartqa_relaxed_correctness(target: str, prediction: str, max_relative_change: float = 0.05) -> bool:
    def _to_float(text: str) -> float | None:
        try:
            if text.endswith("%"):
                return float(text.rstrip("%")) / 100.0
            return float(text)
        except ValueError:
            return None

    prediction_float = _to_float(prediction)
    target_float = _to_float(target)
    if prediction_float is not None and target_float:
        return abs(prediction_float - target_float) / abs(target_float) <= max_relative_change
    return prediction.lower() == target.lower()


# MathVista: lupantech/MathVista, evaluation/extract_answer.py @ ed0d56de2146e75ec9d389ffce6e8af05431e846
# (the rule part of extract_answer: empty, a choice's text, int, float; the rest goes to GPT-4, which
# we cannot run: the extraction is taken as the model's <answer> text) and
# evaluation/calculate_score.py @ e999481e7c42e70b8c97094bb5c7729d4a69c201
# (normalize_extracted_answer + safe_equal).
def mathvista_correct(response: str, problem: dict[str, Any]) -> bool:
    choices, question_type = problem["choices"], problem["question_type"]
    answer_type, precision = problem["answer_type"], problem["precision"]
    extraction = response
    if response != "" and not (question_type == "multi_choice" and response in choices):
        if answer_type == "integer":
            with contextlib.suppress(ValueError):
                extraction = str(int(response))
        elif answer_type == "float":
            with contextlib.suppress(ValueError):
                extraction = str(float(response))
    if question_type == "multi_choice":
        extraction = extraction.strip()
        letter = re.findall(r"\(([a-zA-Z])\)", extraction)
        if len(letter) > 0:
            extraction = letter[0].upper()
        sequential_characters = [chr(ord("A") + i) for i in range(len(choices))]
        if extraction in sequential_characters:
            normalized = choices[sequential_characters.index(extraction)]
        else:
            distances = [_edit_distance(extraction, choice) for choice in choices]
            normalized = choices[distances.index(min(distances))]
    elif answer_type == "integer":
        try:
            normalized = str(int(float(extraction)))
        except (TypeError, ValueError):
            normalized = None
    elif answer_type == "float":
        try:
            normalized = str(round(float(extraction), int(precision)))
        except (TypeError, ValueError):
            normalized = None
    else:
        normalized = str(extraction)
    return normalized == problem["answer"]


# DocVQA ANLS: EvolvingLMMs-Lab/lmms-eval, lmms_eval/api/metrics.py @ 008ddc83c2b57ccbd1457714c5a54c8f03896e9d
# (anls; a copy of the RRC / Qwen-VL infographicsvqa_eval.py rule: distance on folded strings over
# the longer RAW length, and a result below the threshold is 0, so exactly 0.5 survives).
def docvqa_anls(references: list[str], prediction: str, thresh_hold: float = 0.5) -> float:
    values = []
    for answer in references:
        gt_answer = " ".join(answer.strip().lower().split())
        det_answer = " ".join(prediction.strip().lower().split())
        dist = _edit_distance(gt_answer, det_answer)
        length = max(len(answer.upper()), len(prediction.upper()))
        values.append(0.0 if length == 0 else float(dist) / float(length))
    question_result = 1 - min(values)
    return 0.0 if question_result < thresh_hold else question_result


# VQA accuracy: GT-Vision-Lab/VQA, PythonEvaluationTools/vqaEvaluation/vqaEval.py
# @ c4e6a0e4e84b9702d99800d3393652d92b5df224 (processPunctuation, processDigitArticle, evaluate).
_VQA_CONTRACTIONS = {
    "aint": "ain't", "arent": "aren't", "cant": "can't", "couldve": "could've", "couldnt": "couldn't",
    "couldn'tve": "couldn't've", "couldnt've": "couldn't've", "didnt": "didn't", "doesnt": "doesn't",
    "dont": "don't", "hadnt": "hadn't", "hadnt've": "hadn't've", "hadn'tve": "hadn't've", "hasnt": "hasn't",
    "havent": "haven't", "hed": "he'd", "hed've": "he'd've", "he'dve": "he'd've", "hes": "he's", "howd": "how'd",
    "howll": "how'll", "hows": "how's", "Id've": "I'd've", "I'dve": "I'd've", "Im": "I'm", "Ive": "I've",
    "isnt": "isn't", "itd": "it'd", "itd've": "it'd've", "it'dve": "it'd've", "itll": "it'll", "let's": "let's",
    "maam": "ma'am", "mightnt": "mightn't", "mightnt've": "mightn't've", "mightn'tve": "mightn't've",
    "mightve": "might've", "mustnt": "mustn't", "mustve": "must've", "neednt": "needn't", "notve": "not've",
    "oclock": "o'clock", "oughtnt": "oughtn't", "ow's'at": "'ow's'at", "'ows'at": "'ow's'at",
    "'ow'sat": "'ow's'at", "shant": "shan't", "shed've": "she'd've", "she'dve": "she'd've", "she's": "she's",
    "shouldve": "should've", "shouldnt": "shouldn't", "shouldnt've": "shouldn't've",
    "shouldn'tve": "shouldn't've", "somebody'd": "somebodyd", "somebodyd've": "somebody'd've",
    "somebody'dve": "somebody'd've", "somebodyll": "somebody'll", "somebodys": "somebody's",
    "someoned": "someone'd", "someoned've": "someone'd've", "someone'dve": "someone'd've",
    "someonell": "someone'll", "someones": "someone's", "somethingd": "something'd",
    "somethingd've": "something'd've", "something'dve": "something'd've", "somethingll": "something'll",
    "thats": "that's", "thered": "there'd", "thered've": "there'd've", "there'dve": "there'd've",
    "therere": "there're", "theres": "there's", "theyd": "they'd", "theyd've": "they'd've",
    "they'dve": "they'd've", "theyll": "they'll", "theyre": "they're", "theyve": "they've", "twas": "'twas",
    "wasnt": "wasn't", "wed've": "we'd've", "we'dve": "we'd've", "weve": "we've", "werent": "weren't",
    "whatll": "what'll", "whatre": "what're", "whats": "what's", "whatve": "what've", "whens": "when's",
    "whered": "where'd", "wheres": "where's", "whereve": "where've", "whod": "who'd", "whod've": "who'd've",
    "who'dve": "who'd've", "wholl": "who'll", "whos": "who's", "whove": "who've", "whyll": "why'll",
    "whyre": "why're", "whys": "why's", "wont": "won't", "wouldve": "would've", "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've", "wouldn'tve": "wouldn't've", "yall": "y'all", "yall'll": "y'all'll",
    "y'allll": "y'all'll", "yall'd've": "y'all'd've", "y'alld've": "y'all'd've", "y'all'dve": "y'all'd've",
    "youd": "you'd", "youd've": "you'd've", "you'dve": "you'd've", "youll": "you'll", "youre": "you're",
    "youve": "you've"}
_VQA_NUMBERS = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
                "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
_VQA_PUNCT = [";", r"/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",",
              "?", "!"]
_VQA_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
_VQA_COMMA = re.compile(r"(\d)(\,)(\d)")


def _vqa_punctuation(in_text: str) -> str:
    out_text = in_text
    for p in _VQA_PUNCT:
        if (p + " " in in_text or " " + p in in_text) or (re.search(_VQA_COMMA, in_text) is not None):
            out_text = out_text.replace(p, "")
        else:
            out_text = out_text.replace(p, " ")
    return _VQA_PERIOD.sub("", out_text, re.UNICODE)


def _vqa_digit_article(in_text: str) -> str:
    out_text = []
    for word in in_text.lower().split():
        word = _VQA_NUMBERS.setdefault(word, word)
        if word not in ("a", "an", "the"):
            out_text.append(word)
    return " ".join(_VQA_CONTRACTIONS.get(word, word) for word in out_text)


def vqa_accuracy(gt_answers: list[str], prediction: str) -> float:
    res_ans = prediction.replace("\n", " ").replace("\t", " ").strip()
    res_ans = _vqa_digit_article(_vqa_punctuation(res_ans))
    answers = list(gt_answers)
    if len(set(answers)) > 1:
        answers = [_vqa_punctuation(answer) for answer in answers]
    accuracies = []
    for index in range(len(answers)):
        others = answers[:index] + answers[index + 1:]
        accuracies.append(min(1, float(sum(other == res_ans for other in others)) / 3))
    return float(sum(accuracies)) / len(accuracies)


# TabMWP: lupantech/PromptPG, run_gpt3/run_gpt3.py @ 7cf61b1bec07222fc24b4f5a1410911f77c2d2c9 (normalize_answer
# and the comparison answer_norm.lower() == prediction_norm.lower()); the extraction
# (run_gpt3/utilities.py extract_prediction) is for GPT-3 prose: our input is the <answer> text.
def _tabmwp_normalize(text: str, unit: str | None) -> str:
    text = re.sub(r"^[\$]", "", text)
    text = re.sub(r"[\,\.\,\/]$", "", text)
    if re.match(r"^[-+]?[\d,./]+$", text) is not None:
        text = text.replace(",", "")
        if re.match(r"[-+]?\d+$", text) is not None:
            number: float = int(text)
        elif "/" in text:
            nums = text.split("/")
            number = round(float(nums[0]) / float(nums[1]), 3)
        else:
            number = round(float(text), 3)
        return re.sub(r"\.[0]+$", "", str(number))
    if unit:
        text = text.replace(unit, "").strip()
    return text


def tabmwp_correct(prediction: str, answer: str, unit: str | None) -> bool:
    return _tabmwp_normalize(answer, unit).lower() == _tabmwp_normalize(prediction, unit).lower()


# ScienceQA: lupantech/ScienceQA, models/run_gpt3.py @ 360b71cb6a36b9e3161dc9b65e9d86458b7d13a3 (get_gpt3_result's
# "The answer is ([A-Z])." extraction, exactly one match, then get_pred_idx).  Where that fails the
# script guesses an option at random; we return None there (a random guess is not a rule to match).
def scienceqa_pred_idx(output: str, choices: list[str]) -> int | None:
    options = ["A", "B", "C", "D", "E"]
    found = re.compile(r"The answer is ([A-Z]).").findall(output)
    prediction = found[0] if len(found) == 1 else "FAILED"
    if prediction in options[:len(choices)]:
        return options.index(prediction)
    return None


# A-OKVQA: allenai/aokvqa, evaluation/eval_predictions.py @ 42e8c44ff40d13cf272776a3197365f582137772 (eval_aokvqa):
# MC is the predicted option text equal to the right choice; DA is min(1, #equal answers / 3),
# with no normalisation and no leave-one-out averaging.
def aokvqa_mc(prediction: str, choices: list[str], correct_choice_idx: int) -> float:
    return float(prediction == choices[correct_choice_idx])


def aokvqa_da(prediction: str, direct_answers: list[str]) -> float:
    return min(1.0, sum(prediction == answer for answer in direct_answers) / 3.0)


# ScreenSpot: njucckevin/SeeClick, pretrain/screenspot_test.py @ 661ff1b2bfc178ef147fcaabcffbfc34b42455a9: the
# record's bbox is [x, y, w, h]; a click is right when x1 <= x <= x2 and y1 <= y <= y2 (inclusive).
def screenspot_hit(point: tuple[float, float], bbox_xywh: list[float]) -> bool:
    bbox = [bbox_xywh[0], bbox_xywh[1], bbox_xywh[0] + bbox_xywh[2], bbox_xywh[1] + bbox_xywh[3]]
    return (bbox[0] <= point[0] <= bbox[2]) and (bbox[1] <= point[1] <= bbox[3])


# IconQA: lupantech/IconQA @ bcb414ca7b8f046325458c4f0aa1b8c22b7c366c, compute_test_acc in
# run_choose_txt/eval.py and run_choose_img/eval.py (the predicted option index == int(answer)) and in
# run_fill_in_blank/eval.py (the predicted answer string == the answer string, no normalisation).  The
# official models are classifiers: they emit an option index or an answer from the training
# vocabulary, never text to parse; ``predicted`` is that index (multiple choice) or string (blank).
def iconqa_correct(predicted: int | str, problem: dict[str, Any]) -> bool:
    if problem["ques_type"] in ("choose_txt", "choose_img"):
        return predicted == int(problem["answer"])
    return predicted == problem["answer"]


# AI2D as reported with lmms-eval: EvolvingLMMs-Lab/lmms-eval, lmms_eval/tasks/ai2d/ai2d.yaml
# @ 0312cf2675dbc2315846546a8f987a08e826df96 (target: the option letter, utils.ai2d_doc_to_target "mcq";
# metric exact_match with ignore_case and ignore_punctuation) and lmms_eval/api/metrics.py
# @ 309242ce1a4ea1a89e37798a61d4e79201f734f5 (exact_match_hf_evaluate: lower(), delete
# string.punctuation, then plain equality; no whitespace stripping).  AI2D's own release (allenai)
# publishes no scoring script: its accuracy is the index of the chosen option, as IconQA's above.
def ai2d_exact_match(prediction: str, target_letter: str) -> bool:
    table = str.maketrans("", "", string.punctuation)
    return prediction.lower().translate(table) == target_letter.lower().translate(table)


# Geometry3K, its authors' rule: lupantech/InterGPS, symbolic_solver/test.py
# @ d9d2c4cc91079c4449297fa4e22b91f230e09b4d (multithread_solve): the solver's number is right when every
# choice has a precise_value and the right choice's value is (one of) the closest to it; ties count.
def geometry3k_intergps_correct(answer: float | None, problem: dict[str, Any]) -> bool:
    value_list = problem["precise_value"]
    gt_id = ord(problem["answer"]) - 65
    if answer is None:
        return False
    return all(x is not None for x in value_list) and \
        abs(value_list[gt_id] - answer) == min(abs(x - answer) for x in value_list)


# Geometry3K as reported with lmms-eval: EvolvingLMMs-Lab/lmms-eval, lmms_eval/tasks/geometry3k/utils.py
# @ 7a14a6ad8f637302e475adfaaf70a51fa583ba97 (_extract_answer_letter, geometry3k_process_results): the
# last letter A-D of the first pattern that matches, else the first choice whose text the response
# contains; right when that letter is the answer's.
_GEOMETRY3K_PATTERNS = [r"[Aa]nswer\s*[:=]\s*\(?([A-Da-d])\)?", r"\b([A-Da-d])\s*[.)\]]", r"^\s*\(?([A-Da-d])\)?$",
                        r"\b([A-Da-d])\b"]


def geometry3k_lmms_eval_letter(response: str, choices: list[str]) -> str:
    response = response.strip()
    all_choices = ["A", "B", "C", "D"]
    for pattern in _GEOMETRY3K_PATTERNS:
        matches = re.findall(pattern, response)
        if matches:
            for match in reversed(matches):
                if match.upper() in all_choices:
                    return match.upper()
    for idx, choice in enumerate(choices or []):
        if choice.lower() in response.lower():
            return all_choices[idx]
    return ""


def geometry3k_lmms_eval_correct(response: str, problem: dict[str, Any]) -> bool:
    pred = geometry3k_lmms_eval_letter(response, problem["choices"])
    return bool(pred) and pred == problem["answer"].strip().upper()
