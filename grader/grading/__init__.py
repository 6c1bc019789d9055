"""One grading driven from its options to its Report: intake, images, the run layer batch by
batch, the judge, scoring and the reports, in that order (the layers below it).

runner.py      from the command line's options to a graded, reported run
config.py      the options of a grading, in stages: scheduling, presentation, the whole
settings.py    the grading settings, one type for the run, its checkpoint and a round
selection.py   which shapes a grading grades
factory.py     the engine, policy, detector and Grader, built in one place
grader.py      `Grader`: its work folder, the bundle opened once, checkpoint, the workers,
               the Report
worker.py      one worker (a GPU or a CPU slot): its problems, batch by batch, each judged
judging.py     a worker's judging thread: a batch judged beside the next batch's untimed work
seeds.py       the seeds derived from the secret
planned.py     a problem made ready for a worker: image, cases, batches, results so far
checkpoint.py  resuming an interrupted run
phases.py      where a problem's time went
progress.py    `Progress`: the records and lines a run has for its user (the CLI shows them)
outdir.py      one run's output folder
practice.py    `--practice`: public shapes only
last_failed.py `--last-failed`: only what did not pass the run before
"""
