"""Precision and recall of a round's predictions, beside a random predictor's."""

from __future__ import annotations

from ahe.run_folder.decisions import PredictionScore


def score(predicted: set[str], actual: set[str], n: int) -> PredictionScore:
    hits = predicted & actual
    return PredictionScore(
        predicted=sorted(predicted),
        actual=sorted(actual),
        hits=sorted(hits),
        precision=len(hits) / len(predicted) if predicted else None,
        recall=len(hits) / len(actual) if actual else None,
        # a predictor naming |predicted| of the n tasks uniformly at random:
        random_precision=len(actual) / n if predicted and n else None,
        random_recall=min(1.0, len(predicted) / n) if actual and n else None,
    )
