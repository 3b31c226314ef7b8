"""The standard 12-lead ECG of a pseudo-ECG run (``ecg.twelve_lead``): electrodes RA, LA, LL and C1-C6 (the
chest electrodes by their IEC names, so that the leads can be V1-V6), Wilson's central terminal, and the leads I,
II, III, aVR, aVL, aVF, V1-V6 as weighted sums of the electrodes' potentials (cardiosim.analysis.ecg computes those
potentials in an infinite homogeneous bath).

The leads (Einthoven, Goldberger, Wilson), with Wilson's central terminal WCT = (RA + LA + LL)/3 (recorded too):

    I = LA - RA      II = LL - RA      III = LL - LA            (so I + III = II)
    aVR = RA - (LA + LL)/2   aVL = LA - (RA + LL)/2   aVF = LL - (RA + LA)/2      (so aVR + aVL + aVF = 0)
    Vi = φ(Ci) - WCT

Electrode positions for the built-in anatomies (``cardiosim geometry lv|biv``), in the anatomy's own frame (cm).
There is no torso here: the electrodes are placed where they would lie on an adult torso, the heart put in it as
follows, and the potentials are still those of an infinite homogeneous bath (no torso boundary, no lungs), so the
amplitudes are not a body-surface ECG's and the shapes are an approximation of one.

- Body frame (cm): x to the patient's left, y anterior, z superior; the chest an elliptic cylinder 32 cm wide and
  22 cm deep (half-axes 16 and 11; an adult's), the heart's centre 2 cm left of the midline and 6 cm behind the
  sternum (y = 5), at z = 0.
- Precordial electrodes where the standard places them (AHA/ACC/HRS 2007 recommendations, Kligfield et al.,
  Circulation 115:1306): V1 and V2 in the 4th intercostal space at the right and left sternal border, V4 in the
  5th at the midclavicular line, V3 midway between V2 and V4, V5 and V6 at V4's level on the anterior and mid
  axillary lines; on the chest ellipse, the 4th intercostal space 3 cm above the heart's centre, the 5th at it.
- Limb electrodes at the Mason-Likar torso positions (Mason & Likar 1966, Am Heart J 71:196; the exercise and
  monitoring placement): RA and LA in the infraclavicular fossae, LL on the left anterior axillary line halfway
  between the costal margin and the iliac crest. They are torso points, not the limbs' distant ones: Mason-Likar
  leads are known to turn the frontal QRS axis rightward against true limb leads.
- The heart's long axis (base to apex) points left, forward and down, (1, 0.8, -1)/|.| in the body frame (about
  45 degrees from the vertical in the frontal plane); the RV lies on the anterior-right side, the direction
  (-0.5, 1, 0) made perpendicular to the long axis. The anatomy's frame (apex at -z, RV at +x) is turned onto that.
- The idealised ventricles are small (the LV of Land et al. 2015 is 2.5 cm from base to apex, an adult's about
  8.5), so the torso is scaled by 0.3 about the heart's centre: the electrodes keep their places relative to a
  heart of that size. The human-size ones (``cardiosim geometry lv|biv --size human``, 9 cm from base to apex:
  frames human-lv, human-biv) keep the adult torso as it is (scale 1).

The centres (cm, the anatomy's frame): the tissue's centroid, rounded: LV (0, 0, -0.5), BiV (0.35, 0, -0.5);
human-size LV (0, 0, -2.7), BiV (1.1, 0, -2.6).

:func:`qrs` measures a QRS on the twelve leads together: where their root mean square exceeds a fraction (10 %) of
its peak, from the first such sample to the last (a global measure, as the QRS of a spatial magnitude; it does
not depend on one lead's axis). :func:`lead_area` integrates one lead over that window (mV·ms): V1's is negative
where its S wave dominates, as in a left bundle-branch block.
"""

from __future__ import annotations

import numpy as np

ELECTRODES = ("RA", "LA", "LL", "C1", "C2", "C3", "C4", "C5", "C6")
LEADS = ("I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6")
TRACES = (*LEADS, "WCT")           # what ecg.twelve_lead adds to the leads
FRAMES = ("lv", "biv", "human-lv", "human-biv")

# body frame, cm, relative to the torso's centre line at the heart's level (see the module's docstring)
_BODY = {
    "C1": (-2.5, 11.0, 3.0),
    "C2": (2.5, 11.0, 3.0),
    "C3": (5.75, 10.05, 1.5),
    "C4": (9.0, 9.1, 0.0),          # y on the ellipse (x/16)^2 + (y/11)^2 = 1
    "C5": (13.5, 5.9, 0.0),
    "C6": (16.0, 0.0, 0.0),
    "RA": (-12.0, 8.0, 13.0),
    "LA": (12.0, 8.0, 13.0),
    "LL": (12.0, 6.0, -20.0),
}
_HEART = np.array([2.0, 5.0, 0.0])           # the heart's centre in the body frame
_APEX = np.array([1.0, 0.8, -1.0])           # base -> apex
_RV = np.array([-0.5, 1.0, 0.0])             # towards the RV (made perpendicular to the long axis)
# the torso scaled to the ventricles' size: the idealised ones' 0.3, the human-size ones' (--size human) 1
SCALE = {"lv": 0.3, "biv": 0.3, "human-lv": 1.0, "human-biv": 1.0}
CENTRE = {"lv": (0.0, 0.0, -0.5), "biv": (0.35, 0.0, -0.5), "human-lv": (0.0, 0.0, -2.7),
          "human-biv": (1.1, 0.0, -2.6)}


def _axes() -> np.ndarray:
    """Rows: the anatomy's x (towards the RV), y, z (apex to base) in the body frame."""
    z = -_APEX / np.linalg.norm(_APEX)
    x = _RV - (_RV @ z) * z
    x /= np.linalg.norm(x)
    return np.array([x, np.cross(z, x), z])


def positions(frame: str) -> dict[str, list[float]]:
    """{electrode: position (cm) in the frame of cardiosim geometry ``frame`` (lv, biv; human-lv, human-biv:
    cardiosim geometry lv|biv --size human)}."""
    axes = _axes()
    c = np.array(CENTRE[frame])
    return {n: [round(float(v), 4) for v in c + SCALE[frame] * axes @ (np.array(_BODY[n]) - _HEART)]
            for n in ELECTRODES}


def weights() -> dict[str, dict[str, float]]:
    """{trace: {electrode: weight}}: the twelve leads over RA, LA, LL, C1-C6 (Wilson's terminal in the V leads),
    then Wilson's terminal itself."""
    third = 1.0 / 3.0
    out = {"I": {"LA": 1.0, "RA": -1.0}, "II": {"LL": 1.0, "RA": -1.0}, "III": {"LL": 1.0, "LA": -1.0},
           "aVR": {"RA": 1.0, "LA": -0.5, "LL": -0.5}, "aVL": {"LA": 1.0, "RA": -0.5, "LL": -0.5},
           "aVF": {"LL": 1.0, "RA": -0.5, "LA": -0.5}}
    for i in range(1, 7):
        out[f"V{i}"] = {f"C{i}": 1.0, "RA": -third, "LA": -third, "LL": -third}
    out["WCT"] = {"RA": third, "LA": third, "LL": third}
    return out


# The standard printed layout: rows of four columns (I aVR V1 V4 / II aVL V2 V5 / III aVF V3 V6)
LAYOUT = (("I", "aVR", "V1", "V4"), ("II", "aVL", "V2", "V5"), ("III", "aVF", "V3", "V6"))


def qrs(time, leads: dict, fraction: float = 0.1, before: float | None = None) -> dict:
    """The QRS of the twelve leads ({name: trace (mV)} over ``time`` (ms); LEADS, others ignored): the root mean
    square over them, and the first and last sample where it exceeds ``fraction`` of its peak. ``before`` (ms): look
    only at earlier samples (the T wave's start: a trace that holds repolarisation). {"onset", "offset", "duration"
    (ms), "peak" (mV)}."""
    t = np.asarray(time, dtype=float)
    missing = [n for n in LEADS if n not in leads]
    if missing:
        raise ValueError(f"qrs: needs the twelve leads; missing {', '.join(missing)}")
    rms = np.sqrt(np.mean([np.asarray(leads[n], dtype=float) ** 2 for n in LEADS], axis=0))
    if before is not None:
        rms = np.where(t < before, rms, 0.0)
    peak = float(rms.max())
    if not peak > 0:
        raise ValueError("qrs: the leads are zero: no QRS")
    above = np.flatnonzero(rms > fraction * peak)
    onset, offset = float(t[above[0]]), float(t[above[-1]])
    return {"onset": onset, "offset": offset, "duration": offset - onset, "peak": peak}


def lead_area(time, trace, onset: float, offset: float) -> float:
    """The integral of one lead (mV) from ``onset`` to ``offset`` (ms), by the trapezoidal rule: mV·ms."""
    t, v = np.asarray(time, dtype=float), np.asarray(trace, dtype=float)
    w = (t >= onset) & (t <= offset)
    return float(np.trapezoid(v[w], t[w]))
