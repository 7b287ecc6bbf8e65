"""CUDA kernels of the GPU FDTD step (wave/fdtd_cuda.py explains the order and what matches the CPU kernel).

A module of its own, imported only when the GPU path is used: it imports Numba's CUDA target at module level
(which Numba's CUDA simulator needs to run the kernels on the CPU).
"""
from numba import cuda


@cuda.jit(device=True)
def _cell(p):
    """This thread's interior cell (1-based, ghosts excluded) and whether it is one; k (contiguous in memory)
    varies fastest across a warp, so loads coalesce."""
    k, j, i = cuda.grid(3)
    i += 1
    j += 1
    k += 1
    return i, j, k, i <= p.shape[0] - 2 and j <= p.shape[1] - 2 and k <= p.shape[2] - 2


@cuda.jit
def _velocity(p, vx, vy, vz, cv, vcoef, xfm, xfa, xfb, xfpsi, yfm, yfa, yfb, yfpsi, zf0, zf1, zfa, zfb,
              zfpsi):
    i, j, k, inside = _cell(p)
    if not inside:
        return
    mxf = xfm[i]
    d = p[i + 1, j, k] - p[i, j, k]
    if mxf < 0:
        vx[i, j, k] -= cv * d
    else:
        s = xfb[mxf] * xfpsi[mxf, j, k] + xfa[mxf] * d
        xfpsi[mxf, j, k] = s
        vx[i, j, k] = (vx[i, j, k] - cv * d) - vcoef * s
    myf = yfm[j]
    d = p[i, j + 1, k] - p[i, j, k]
    if myf < 0:
        vy[i, j, k] -= cv * d
    else:
        s = yfb[myf] * yfpsi[i, myf, k] + yfa[myf] * d
        yfpsi[i, myf, k] = s
        vy[i, j, k] = (vy[i, j, k] - cv * d) - vcoef * s
    d = p[i, j, k + 1] - p[i, j, k]
    vz[i, j, k] -= cv * d
    if k <= zf0:
        q = k - 1
        s = zfb[q] * zfpsi[i, j, q] + zfa[q] * d
        zfpsi[i, j, q] = s
        vz[i, j, k] -= vcoef * s
    elif k >= zf1:
        m = zf0 + k - zf1
        s = zfb[m] * zfpsi[i, j, m] + zfa[m] * d
        zfpsi[i, j, m] = s
        vz[i, j, k] -= vcoef * s

@cuda.jit
def _pressure(p, vx, vy, vz, cp, pcoef, xcm, xca, xcb, xcpsi, ycm, yca, ycb, ycpsi, zc0, zc1, zca, zcb,
              zcpsi):
    i, j, k, inside = _cell(p)
    if not inside:
        return
    dxv = vx[i, j, k] - vx[i - 1, j, k]
    dyv = vy[i, j, k] - vy[i, j - 1, k]
    dzv = vz[i, j, k] - vz[i, j, k - 1]
    pv = p[i, j, k] - cp * ((dxv + dyv) + dzv)
    mxc = xcm[i]
    if mxc >= 0:
        s = xcb[mxc] * xcpsi[mxc, j, k] + xca[mxc] * dxv
        xcpsi[mxc, j, k] = s
        pv -= pcoef * s
    myc = ycm[j]
    if myc >= 0:
        s = ycb[myc] * ycpsi[i, myc, k] + yca[myc] * dyv
        ycpsi[i, myc, k] = s
        pv -= pcoef * s
    if k <= zc0:
        q = k - 1
        s = zcb[q] * zcpsi[i, j, q] + zca[q] * dzv
        zcpsi[i, j, q] = s
        pv -= pcoef * s
    elif k >= zc1:
        m = zc0 + k - zc1
        s = zcb[m] * zcpsi[i, j, m] + zca[m] * dzv
        zcpsi[i, j, m] = s
        pv -= pcoef * s
    p[i, j, k] = pv

@cuda.jit
def _walls(vx, vy, vz, bface, vb, first):
    # wall faces (air on both sides; entries first.. of bface) take the wall's velocity before any cell reads them
    m = first + cuda.grid(1)
    if m >= bface.shape[0]:
        return
    ax = bface[m, 0]
    if ax == 0:
        vx[bface[m, 1], bface[m, 2], bface[m, 3]] = vb[m]
    elif ax == 1:
        vy[bface[m, 1], bface[m, 2], bface[m, 3]] = vb[m]
    else:
        vz[bface[m, 1], bface[m, 2], bface[m, 3]] = vb[m]

@cuda.jit
def _body(p, vx, vy, vz, cp, bface, vb, n_one_sided):
    m = cuda.grid(1)
    if m >= n_one_sided:
        return
    ax = bface[m, 0]
    fi = bface[m, 1]
    fj = bface[m, 2]
    fk = bface[m, 3]
    up = bface[m, 4] > 0
    if ax == 0:
        d = vb[m] - vx[fi, fj, fk]
        vx[fi, fj, fk] = vb[m]
        if up:
            cuda.atomic.add(p, (fi, fj, fk), -(cp * d))
        else:
            cuda.atomic.add(p, (fi + 1, fj, fk), cp * d)
    elif ax == 1:
        d = vb[m] - vy[fi, fj, fk]
        vy[fi, fj, fk] = vb[m]
        if up:
            cuda.atomic.add(p, (fi, fj, fk), -(cp * d))
        else:
            cuda.atomic.add(p, (fi, fj + 1, fk), cp * d)
    else:
        d = vb[m] - vz[fi, fj, fk]
        vz[fi, fj, fk] = vb[m]
        if up:
            cuda.atomic.add(p, (fi, fj, fk), -(cp * d))
        else:
            cuda.atomic.add(p, (fi, fj, fk + 1), cp * d)

@cuda.jit
def _solid(p, solid):
    m = cuda.grid(1)
    if m < solid.shape[0]:
        p[solid[m, 0], solid[m, 1], solid[m, 2]] = 0.0

@cuda.jit
def _sources(p, scell, sval):
    m = cuda.grid(1)
    if m < scell.shape[0]:
        cuda.atomic.add(p, (scell[m, 0], scell[m, 1], scell[m, 2]), sval[m])

@cuda.jit
def _receivers(p, idx, w, out):
    m = cuda.grid(1)
    if m >= idx.shape[0]:
        return
    i = idx[m, 0]
    j = idx[m, 1]
    k = idx[m, 2]
    fx = w[m, 0]
    fy = w[m, 1]
    fz = w[m, 2]
    acc = 0.0
    for di in range(2):
        wx = fx if di else 1.0 - fx
        acc_p = ((1.0 - fy) * ((1.0 - fz) * p[i + di, j, k] + fz * p[i + di, j, k + 1])
                 + fy * ((1.0 - fz) * p[i + di, j + 1, k] + fz * p[i + di, j + 1, k + 1]))
        acc += wx * acc_p
    out[m] = acc
