"""Physical constants and thresholds used across the package, one place each (SI units).

Air at 20 degrees C and 1 atm: speed of sound c = 343.2 m/s and density rho = 1.2041 kg/m^3 (the values of the
PAN paper, Chadwick, Zheng & James 2012, and of ISO 9613-1 at 20 degrees C). A scene's ``[air]`` table overrides
them; every function that takes ``c`` or ``rho`` defaults to these.
"""
from __future__ import annotations

#: speed of sound in air [m/s] (20 degrees C)
AIR_C = 343.2
#: density of air [kg/m^3] (20 degrees C, 1 atm)
AIR_RHO = 1.2041
#: relative normal speed below which a contact is resting contact, not an impact [m/s] (Chadwick, Zheng & James
#: 2012, "Precomputed Acceleration Noise", sec. 4.3: 5 cm/s)
V_MIN = 0.05
#: default wavelet tolerance of the proxy soundbank (sources/pan/soundbank.py): with 0.01 (Chadwick, Zheng & James
#: 2012, "Faster Acceleration Noise ...", sec. 4.1: 1-5 % error) an ellipsoid's proxy matches its own PAN field
#: to 0.7 %; at 0.04, the paper's coarsest, translation stays within 2 % but the rotation noise of long contacts
#: is 22-25 % off (the eps rule drops the coarse wavelet levels where an ellipsoid's rotation radiates weakly)
BANK_EPS = 0.01
