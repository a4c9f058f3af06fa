#!/usr/bin/env bash
# Session 32 call B: session 31's prepared call E (the wgmma kernel past 1024 rows), with
# its patch applied to the device's copy of main instead of a local branch.
#   run(command="bash docs/perf/session32/callB.sh", carry=[".ffi"])
set -u
patch -p1 -s < docs/perf/session31/wip/wgmma-past-1024/0001-*.patch || exit 1
bash docs/perf/session31/wip/wgmma-past-1024/callE_prepared.sh
