#!/usr/bin/env bash
# Diagnose the scratch folder of a GPU-host container (host-runtime mode).
python3 - <<'PY'
from grader.sandbox.docker_engine import get_engine
from grader.sandbox.spec import Bind, ContainerSpec, Role
e = get_engine()
spec = ContainerSpec(image="grader-hostfs:skeleton", role=Role.PROBE, session="probe",
    command=["/bin/sh", "-c", "id; ls -ld /tmp; grep ' /tmp ' /proc/mounts; mkdir /tmp/triton && echo mkdir-ok"],
    binds=tuple(Bind(host=p, container=p) for p in ("/usr", "/etc", "/opt")))
print(e.run(spec).logs)
PY
