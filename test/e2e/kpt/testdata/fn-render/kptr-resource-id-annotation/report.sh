#!/bin/sh
# Prints the keys of the kpt-resource-id annotations it is given on stderr,
# then its input unchanged.
in=$(cat)
printf '%s\n' "$in" | grep -o '[a-z.]*/kpt-resource-id' | sort -u >&2
printf '%s\n' "$in"
