/* Fixture (ctest arch.trainer_parts_fixture): the trainer's own files may take it. */
struct fg_trainer;
int fg_trainer_fixture_step(struct fg_trainer *t);
