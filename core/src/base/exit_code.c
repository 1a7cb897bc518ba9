/* fg_status_exit_code: the exit status a command ends with for a status (README "Exit status"). */
#include "fulgur/fulgur.h"
#include "io_status.h"

int fg_status_exit_code(fg_status st, int configuring)
{
    if (st == FG_STATUS_IO)
        return 4; /* a write failed for lack of space or a device fault: not the input's fault */
    if (st == FG_STATUS_SIGINT)
        return 130;
    if (st == FG_STATUS_SIGTERM)
        return 143;
    switch (st) {
    case FG_OK: return 0;
    case FG_INVALID_ARGUMENT:
    case FG_NOT_FOUND:
    case FG_UNAVAILABLE:
    case FG_INCOMPATIBLE: return 2;
    default: return configuring ? 2 : 1;
    }
}
