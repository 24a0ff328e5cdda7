"""3-D coordinates of memories for the map (jam-journalistic-agent-memory.md, 3D Visualization
Pipeline): PCA, t-SNE, UMAP.

Runs inside PostgreSQL (PL/Python, Debian's python3-sklearn: PCA and t-SNE) and in the
client (UMAP needs umap-learn, which only PyPI has).
"""
from __future__ import annotations

import numpy as np


def project(X, method: str = "pca", seed: int = 0):
    """JAM, 3D Visualization Pipeline: 3-D coordinates of the rows of X by PCA (default,
    deterministic), t-SNE (perplexity 30, max_iter 1000) or UMAP (n_neighbors 15). t-SNE's
    perplexity must be below the number of points: with fewer than 91 points it is
    (n - 1) / 3. UMAP needs umap-learn (PyPI; not packaged by Debian, so not in PL/Python)."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if n == 0:
        return np.zeros((0, 3))
    if method == "pca":
        from sklearn.decomposition import PCA

        c = min(3, n, X.shape[1])
        out = np.zeros((n, 3))
        out[:, :c] = PCA(n_components=c, svd_solver="full").fit_transform(X)
        return _orient(out)
    if method == "tsne":
        import inspect

        from sklearn.manifold import TSNE

        if n < 4:
            return project(X, "pca")
        iters = "max_iter" if "max_iter" in inspect.signature(TSNE).parameters else "n_iter"
        kw = {iters: 1000}
        return TSNE(n_components=3, perplexity=min(30.0, (n - 1) / 3.0), random_state=seed, init="pca",
                    **kw).fit_transform(X)
    if method == "umap":
        try:
            import umap
        except ImportError:
            raise ImportError("UMAP needs the umap-learn package (pip install umap-learn)") from None
        if n < 4:
            return project(X, "pca")
        return umap.UMAP(n_components=3, n_neighbors=min(15, n - 1), random_state=seed).fit_transform(X)
    raise ValueError(f"unknown projection {method!r}: use pca, tsne or umap")


def _orient(P):
    """PCA's axes have arbitrary signs: make each axis's largest |coordinate| positive, so the
    same data always gives the same picture."""
    for j in range(P.shape[1]):
        col = P[:, j]
        if col.size and col[np.argmax(np.abs(col))] < 0:
            P[:, j] = -col
    return P
