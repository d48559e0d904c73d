#!/bin/bash
# The gdn conformance fixtures' errors (NMSE against the CPU oracle) of a4 and tc, logged.
cd "$(dirname "$0")/../../.."
CALL=${CALL:-nmse}
BUDGET=${BUDGET:-200}
. scripts/device-call.sh
for v in a4 tc; do
  run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 METRALE_CF_LOG_NMSE=1 timeout $(tl 80) \
    .carry/var/$v/metrale_conformance --jobs 8 --verbose --filter 'gdn*/*' > $O/nmse_$v.txt 2>&1
  el "$v gdn nmse rc=$? $(tail -1 $O/nmse_$v.txt)"
done
finish
