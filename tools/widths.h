/* Layer widths on the command line, shared by the tools. */
#ifndef STRATA_TOOLS_WIDTHS_H
#define STRATA_TOOLS_WIDTHS_H

/**
 * @brief Parse "784-256-128-10" into at most @p max widths, each in 1..2^20.
 * @return the number of widths (at least 2), or -1 when @p s is not such a list.
 */
int strata_tool_parse_widths(const char *s, int *w, int max);

#endif
