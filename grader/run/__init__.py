"""The run layer: one batch of a problem's cases in its containers, and nothing after.

plan.py       how a problem's cases are split into batches, and the limits of each container
jobs.py       what each container of a batch is given (spec, folders, job)
batch.py      one batch, and what every protocol reads off the entry's container; what comes
              back is evidence (grader/model/runs.py) for the judge
pair.py       the reference's and the entry's containers side by side (the default)
sequential.py one container after the other
ahead.py      a batch's containers started ahead, waiting at their gates (Standby, Beside)
cached.py     the entry alone on a reference a round computed already
"""
