/* Status names, descriptions and the thread-local "last error" message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "strata/version.h"
#include "base/base.h"

static _Thread_local char last_error[2048];

const char *strata_strerror(int status)
{
        switch (status) {
#define STRATA__STATUS_TEXT(name, value, text)                                                 \
        case value:                                                                            \
                return text;
                STRATA_STATUS_LIST(STRATA__STATUS_TEXT)
#undef STRATA__STATUS_TEXT
        }
        return "unknown status";
}

const char *strata_status_name(int status)
{
        switch (status) {
#define STRATA__STATUS_NAME(name, value, text)                                                 \
        case value:                                                                            \
                return #name;
                STRATA_STATUS_LIST(STRATA__STATUS_NAME)
#undef STRATA__STATUS_NAME
        }
        return "STRATA_EUNKNOWN";
}

const char *strata_last_error(void)
{
        return last_error;
}

int strata__vfail(int status, const char *fmt, va_list ap)
{
        int n = snprintf(last_error, sizeof(last_error), "%s: ", strata_strerror(status));

        if (n < 0 || (size_t)n >= sizeof(last_error))
                return status;
        vsnprintf(last_error + n, sizeof(last_error) - (size_t)n, fmt, ap);
        return status;
}

int strata__fail(int status, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        status = strata__vfail(status, fmt, ap);
        va_end(ap);
        return status;
}

int strata_set_error(int status, const char *message)
{
        if (!message)
                return status;
        return strata__fail(status, "%s", message);
}

int strata__set_error(int status, const char *msg)
{
        snprintf(last_error, sizeof(last_error), "%s", msg);
        return status;
}

const char *strata__last_reason(int status)
{
        size_t skip = strlen(strata_strerror(status)) + 2;

        return strlen(last_error) > skip ? last_error + skip : last_error;
}

unsigned strata_version(void)
{
        return STRATA_VERSION_HEX;
}
