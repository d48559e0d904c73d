#!/bin/bash
cd .carry/h
for r in 1 2; do for m in 7 10 11 12; do echo "== mode $m round $r"; ./kb2_$m; done; done > $OUT/kb2.txt 2>&1
