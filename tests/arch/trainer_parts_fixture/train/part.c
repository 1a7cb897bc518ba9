/* Fixture (ctest arch.trainer_parts_fixture): a part that takes the whole trainer, its
 * prototype over two lines and the trainer its second parameter. */
#include "part.h"
#include "trainer_internal.h"

static int fixture_helper(int n) { return n; }

int fg_part_fixture_poll(int now,
                         const struct fg_trainer *t)
{
    (void)t; /* fg_trainer *t in a comment is not a parameter */
    return fixture_helper(now);
}
