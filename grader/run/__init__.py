"""The run layer: one grading from a bundle to a report.

runner.py     from the command line's options to a graded, reported run
config.py     the options of one run, passed down whole
grading.py    `Grader`: intake, images, checkpoint, the workers, the report
worker.py     one worker (a GPU or a CPU slot): its problems, batch by batch
plan.py       how a problem's cases are split into batches, and their limits
jobs.py       what each container of a batch is given (spec, folders, job)
batch.py      one batch: the reference's and the entry's containers
channel.py    the entry's evidence channel (frames on the container's stdout)
evidence.py   what came back from a container, read without trusting it
checkpoint.py resuming an interrupted run
phases.py     where a problem's time went
progress.py   progress lines and bars
outdir.py     one run's output folder
"""
