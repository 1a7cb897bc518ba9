/* The top layer of the fixture. */
int high_value(void);
