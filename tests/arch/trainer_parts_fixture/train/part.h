/* Fixture (ctest arch.trainer_parts_fixture): a function pointer that takes the trainer. */
struct fg_trainer;
typedef struct fg_part_fixture_verbs {
    int (*run)(fg_trainer *t, void *err);
} fg_part_fixture_verbs;
int fg_part_fixture_poll(int now, const struct fg_trainer *t);
