/* The bottom layer of the fixture. */
int low_value(void);
