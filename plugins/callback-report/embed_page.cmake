# cmake -DIN=report_page.html -DOUT=report_page_bytes.c -P embed_page.cmake
# The page as a byte array (report_page.h: report_page_bytes, report_page_size).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}" "/* Generated from report_page.html by embed_page.cmake: do not edit. */\n"
  "#include <stddef.h>\n"
  "const unsigned char report_page_bytes[] = {\n${bytes}0x00};\n"
  "const size_t report_page_size = ${size};\n")
