/* An upward include: low/ reaches into high/, the error the check must report. */
#include "low.h"
#include "high.h"

int low_value(void) { return 1; }
