"""3-D coordinates of memories for the map (jam-journalistic-agent-memory.md, 3D Visualization
Pipeline): PCA, t-SNE, UMAP.

Runs inside PostgreSQL (PL/Python, Debian's python3-sklearn: PCA and t-SNE) and in the
client (UMAP needs umap-learn, which only PyPI has).
"""
from __future__ import annotations

import numpy as np

from pgmem.engine.guard import cancellable, tick


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

        from sklearn.decomposition import PCA
        from sklearn.manifold import TSNE

        if n < 4:
            return project(X, "pca")
        iters = "max_iter" if "max_iter" in inspect.signature(TSNE).parameters else "n_iter"
        kw = {iters: 1000}
        perplexity = min(30.0, (n - 1) / 3.0)
        # (issue 27, H1: every long step can be cancelled.) The neighbours t-SNE needs (3 x
        # perplexity, as scikit-learn takes them) are found here chunk by chunk, with a
        # cancellation check between chunks, and handed over as a sparse graph of squared
        # distances (what TSNE computes itself for metric="euclidean"); the PCA start is
        # scikit-learn's own (randomized PCA scaled to a first-axis std of 1e-4). The gradient
        # descent runs under guard.cancellable(): a check between iterations.
        graph = knn_graph(X, min(n - 1, int(3.0 * perplexity + 1)))
        init = PCA(n_components=3, svd_solver="randomized", random_state=seed).fit_transform(X).astype(np.float32)
        init = init / np.std(init[:, 0]) * 1e-4
        with cancellable():
            return TSNE(n_components=3, perplexity=perplexity, random_state=seed, init=init, metric="precomputed",
                        **kw).fit_transform(graph)
    if method == "umap":
        try:
            import umap
        except ImportError:
            raise ImportError("UMAP needs the umap-learn package (pip install umap-learn)") from None
        if n < 4:
            return project(X, "pca")
        return umap.UMAP(n_components=3, n_neighbors=min(15, n - 1), random_state=seed).fit_transform(X)
    raise ValueError(f"unknown projection {method!r}: use pca, tsne or umap")


def knn_graph(X, k: int, chunk: int = 256):
    """Each row of X and its ``k`` nearest other rows by Euclidean distance, as a sparse n x n
    matrix of squared distances (each row holds itself at 0 first, as scikit-learn's
    neighbour graphs do), computed ``chunk`` rows at a time (guard.tick() between chunks;
    memory O(chunk x n)). A distance of 0 to another row (a duplicate) is stored as 1e-12."""
    from scipy.sparse import csr_matrix

    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    sq = (X * X).sum(1)
    indices = np.empty((n, k + 1), dtype=np.int64)
    values = np.zeros((n, k + 1), dtype=np.float64)
    indices[:, 0] = np.arange(n)
    for s in range(0, n, chunk):
        tick()
        B = X[s:s + chunk]
        m = B.shape[0]
        d2 = sq[s:s + m, None] - 2.0 * (B @ X.T) + sq[None, :]
        d2[np.arange(m), np.arange(s, s + m)] = np.inf  # not its own neighbour
        idx = np.argpartition(d2, k - 1, axis=1)[:, :k]
        near = np.take_along_axis(d2, idx, axis=1)
        order = np.argsort(near, axis=1, kind="stable")  # each row by distance, as scikit-learn wants it
        indices[s:s + m, 1:] = np.take_along_axis(idx, order, axis=1)
        values[s:s + m, 1:] = np.maximum(np.take_along_axis(near, order, axis=1), 1e-12)
    return csr_matrix((values.ravel(), indices.ravel(), np.arange(0, n * (k + 1) + 1, k + 1)), shape=(n, n))


def _orient(P):
    """PCA's axes have arbitrary signs: make each axis's largest |coordinate| positive, so the
    same data always gives the same picture."""
    for j in range(P.shape[1]):
        col = P[:, j]
        if col.size and col[np.argmax(np.abs(col))] < 0:
            P[:, j] = -col
    return P
