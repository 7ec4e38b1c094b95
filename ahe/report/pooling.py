"""Pooled precision and recall of the evolve agent's predictions: a leaf both the audit and the
figures use (neither imports the other for it)."""

from __future__ import annotations


def pooled(scores: list[dict], n_tasks: list[int]) -> dict:
    """Pool one kind of prediction over iterations (micro-average).

    precision = Σ hits / Σ predicted, recall = Σ hits / Σ actual, over the iterations given;
    the random baseline pools the random predictor's expected hits the same way: an
    iteration with n tasks, p predicted and a actual flips contributes p·a/n expected hits,
    so random precision = Σ(p·a/n) / Σ p and random recall = Σ(p·a/n) / Σ a.
    """
    hits = sum(len(s.get("hits", [])) for s in scores)
    pred = sum(len(s.get("predicted", [])) for s in scores)
    act = sum(len(s.get("actual", [])) for s in scores)
    exp_hits = sum(
        len(s.get("predicted", [])) * len(s.get("actual", [])) / n for s, n in zip(scores, n_tasks) if n
    )
    return {
        "iterations": len(scores),
        "predicted": pred,
        "actual": act,
        "hits": hits,
        "precision": hits / pred if pred else None,
        "recall": hits / act if act else None,
        "random_precision": exp_hits / pred if pred and act is not None else None,
        "random_recall": exp_hits / act if act and pred is not None else None,
    }
