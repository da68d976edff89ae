#include "tools/widths.h"

#include <errno.h>
#include <stdlib.h>

int strata_tool_parse_widths(const char *s, int *w, int max)
{
        int n = 0;

        while (*s) {
                char *end;
                long v;

                errno = 0;
                v = strtol(s, &end, 10);
                if (errno || end == s || v <= 0 || v > (1 << 20) || n == max)
                        return -1;
                w[n++] = (int)v;
                if (*end == '-')
                        end++;
                else if (*end)
                        return -1;
                s = end;
        }
        return n >= 2 ? n : -1;
}
