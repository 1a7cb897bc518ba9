/* libfgmissing.so: a dependency the missingdep fixture links against, built into a folder
 * that is on no runtime search path, so dlopen of the fixture fails on it. */
__attribute__((visibility("default"))) void fg_missing_dependency(void);

void fg_missing_dependency(void)
{
}
