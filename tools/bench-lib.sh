# Helpers the tools/bench-*.sh scripts share (sourced): the median of numbers on stdin, and
# a / b to full precision.
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { echo "$1 / $2" | bc -l; }
