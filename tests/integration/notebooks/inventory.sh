# %% succeeded stdout~"3 items"
# A bash notebook as an agent drives one: state in declared variables, helpers, a failed
# command and its fix, stdin, and an exit that ends it.
declare -A stock=([apples]=12 [pears]=0 [plums]=7)
declare -i total=0
typeset -a log=()
readonly WAREHOUSE=north
echo "${#stock[@]} items"
# %% succeeded stdout="apples=12 plums=7 total=19\n"
for item in $(printf '%s\n' "${!stock[@]}" | sort); do
  (( stock[$item] > 0 )) && printf '%s=%s ' "$item" "${stock[$item]}"
  total+=${stock[$item]}
done
echo "total=$total"
# %% failed stderr~"WAREHOUSE: readonly variable"
WAREHOUSE=south
# %% succeeded stdout="north 19 [apples]\n"
log+=(apples)
echo "$WAREHOUSE $total [${log[*]}]"
# %% succeeded
shopt -s expand_aliases
alias count='wc -l <'
restock() { stock[$1]=$(( ${stock[$1]} + $2 )); log+=("$1"); }
set -o pipefail
trap 'echo "cleanup ran"' EXIT
mkdir -p /tmp/inv && cd /tmp/inv
# %% succeeded stdout="pears=5 2 /tmp/inv\n"
restock pears 5
printf '%s\n' "${!stock[@]}" > items.txt
echo "pears=${stock[pears]} ${#log[@]} $(pwd)"
# %% succeeded stdout="3\n"
count items.txt
# %% failed exit=1
false | true
# %% succeeded stdout~"got: widgets 4" stdin="widgets 4\n"
read -r name qty
echo "got: $name $qty"
stock[$name]=$qty
# %% succeeded stdout="4 items, 28 units\n"
sum=0; for q in "${stock[@]}"; do (( sum += q )); done
echo "${#stock[@]} items, $sum units"
# %% failed exit=3 alive=false stdout~"cleanup ran"
echo "leaving"
exit 3
