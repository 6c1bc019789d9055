"""Intake: a submission bundle opened without trusting it, and the participants' side
(packing a folder, checking a bundle, packing a folder or a kernel file on the fly).
"""
