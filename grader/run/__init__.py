"""The run layer: one batch of a problem's cases in its containers, and nothing after.

plan.py       how a problem's cases are split into batches, and the limits of each container
jobs.py       what each container of a batch is given (spec, folders, job)
batch.py      one batch: the reference's and the entry's containers, side by side or started
              ahead; what comes back is evidence (grader/model/runs.py) for the judge
"""
